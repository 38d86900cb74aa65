// The code host contract (test/support/vcs-host-contract.ts) against a real Gitea v1.27.3
// (built from its Go modules, test/support/gitea.ts): the server's Gitea host
// (src/server/vcs/gitea/host.ts) and Gitea's own side, driven through its API and git as
// people would (test/support/gitea-site.ts). One Gitea for the file; each case gets a
// repository of its own. The page size is 1, so every list the host reads comes in pages.
import { after } from 'node:test';
import { nullLogger } from '../src/log.js';
import { giteaHost } from '../src/server/vcs/gitea/host.js';
import { type Gitea, startGitea } from './support/gitea.js';
import {
  type DeliveryCatcher,
  type GiteaPeople,
  addSiteHooks,
  createPeople,
  giteaSite,
  startDeliveryCatcher,
} from './support/gitea-site.js';
import { vcsHostContract } from './support/vcs-host-contract.js';

const SECRET = 'contract-gitea-secret';
const GITEA_HOST = '127.0.236.11';
const CATCHER_HOST = '127.0.236.12';

let shared: Promise<{ gitea: Gitea; people: GiteaPeople; catcher: DeliveryCatcher }> | undefined;
let repos = 0;

after(async () => {
  const s = await shared?.catch(() => undefined);
  await s?.catcher.close();
  await s?.gitea.stop();
});

vcsHostContract('Gitea (real, v1.27.3)', async () => {
  shared ??= (async () => {
    const gitea = await startGitea({ host: GITEA_HOST });
    return { gitea, people: await createPeople(gitea), catcher: await startDeliveryCatcher(CATCHER_HOST) };
  })();
  const { gitea, people, catcher } = await shared;
  const repo = await gitea.createRepo(people.owner, `infra-${++repos}`);
  await gitea.push(repo, people.owner, { branch: 'main', files: { 'README.md': '# infra\n' }, message: 'first' });
  await gitea.addCollaborator(repo, people.dev);
  await gitea.addCollaborator(repo, people.bot);
  await addSiteHooks(gitea, repo, catcher, SECRET);
  const host = giteaHost(
    { user: people.bot.name, token: () => people.bot.token, webhookSecret: SECRET, baseUrl: gitea.url, pageSize: 1 },
    { logger: nullLogger() },
  );
  const site = giteaSite({ gitea, people, repo, catcher, headerNames: host.webhooks.headerNames });
  return { host, site, cleanup: async () => undefined };
});
