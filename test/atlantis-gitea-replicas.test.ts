// The Gitea differential (test/support/atlantis-gitea-differential.ts) against two replicas
// sharing one Redis, Gitea's webhooks spread over them by a round-robin forwarder (what a
// Kubernetes Service does): the two must write to Gitea what one Atlantis v0.47 did, with the
// same deliberate differences and nothing else.
import { compareGiteaWithAtlantis } from './support/atlantis-gitea-differential.js';

compareGiteaWithAtlantis({
  title: 'two replicas on one Redis write to a real Gitea what Atlantis v0.47 writes',
  replicas: 2,
  net: '127.0.245',
});
