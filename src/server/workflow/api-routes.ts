// The API's routes (http/api.ts) wired to the workflow: the checks http/api.ts makes before a
// run, and the run itself through api-command.ts, as one operation of the server.
import type { ApiDeps } from '../http/api.js';
import type { AtlantisServer } from '../server.js';
import type { RepoAllowlist } from '../vcs/repo-allowlist.js';
import { type ApiCommandDeps, runApiCommand } from './commands/api-command.js';
import { checkApplyLock } from './commands/apply-lock.js';

/** The routes' dependencies (http/api.ts) for the plugin: the API runs here, as one operation of the server. */
export function apiRoutes(
  d: ApiCommandDeps,
  o: { server: Pick<AtlantisServer, 'startOperation' | 'finishOperation'>; allowlist: RepoAllowlist },
): ApiDeps {
  return {
    apiSecret: d.config.apiSecret,
    allowlist: o.allowlist,
    hostname: d.host.hostname,
    hostType: d.host.typeName,
    pullUrl: (repo, pull) => d.host.pullUrl(repo, pull),
    teamRules: d.config.teamAllowlist,
    logger: d.logger,
    startOperation: (info) => o.server.startOperation(info),
    finishOperation: (op) => o.server.finishOperation(op),
    run: (command, req) => runApiCommand(d, command, req),
    listLocks: () => d.store.list(),
    globalApplyLock: async () => {
      const gate = await checkApplyLock(d.store, d.config.disableGlobalApplyLock);
      return gate.kind === 'refuse' ? gate.comment : undefined;
    },
  };
}
