// `make bench`: runs every benchmark, prints figures and ratios against baselines measured
// in the same run, and exits non-zero when a target is missed.
import { benchStatusLatency } from './status-latency.js';
import { benchWorkflowOverhead } from './workflow-overhead.js';
import { benchControllerScale } from './controller-scale.js';

const benches: Array<[string, () => Promise<{ ok: boolean }>]> = [
  ['status-latency', benchStatusLatency],
  ['workflow-overhead', benchWorkflowOverhead],
  ['controller-scale', benchControllerScale],
  ['webhook-burst', async () => (await import('./webhook-burst.js')).benchWebhookBurst()],
  ['replicas-burst', async () => (await import('./replicas-burst.js')).benchReplicasBurst()],
  ['rollout-modes', async () => (await import('./rollout-modes.js')).benchRolloutModes()],
  ['plugin-cache', async () => (await import('./plugin-cache-policy.js')).benchPluginCache()],
  ['policy-check', async () => (await import('./plugin-cache-policy.js')).benchPolicyCheck()],
  ['comment-split', async () => (await import('./comment-split.js')).benchCommentSplit()],
  ['single-project', async () => (await import('./single-project.js')).benchSingleProject()],
  ['soak', async () => (await import('./soak.js')).benchSoak()],
  ['monorepo', async () => (await import('./monorepo.js')).benchMonorepo()],
  ['host-overhead', async () => (await import('./host-overhead.js')).benchHostOverhead()],
];

const only = process.argv.slice(2);
let failed = 0;
for (const [name, fn] of benches) {
  if (only.length && !only.includes(name)) continue;
  console.log(`\n# ${name}`);
  const { ok } = await fn();
  if (!ok) {
    failed++;
    console.log(`${name}: target missed`);
  }
}
process.exit(failed ? 1 : 0);
