// Three replicas sharing one real redis-server (`--locking-db-type redis`), the scenario's
// webhooks spread round-robin over them: each PR's commands run on its owner wherever the
// webhook landed, and GitHub must see what one Atlantis v0.47 posts, step by step: the same
// fixture and deliberate differences as test/atlantis-differential.test.ts, nothing else.
import { compareWithAtlantis } from './support/atlantis-differential.js';

compareWithAtlantis({
  title: 'three replicas sharing Redis, webhooks round-robin, post what Atlantis v0.47 posts',
  replicas: 3,
  // 127.0.19.x: this file's own loopback addresses.
  net: '127.0.19',
});
