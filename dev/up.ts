// Starts the local cluster and the local node by hand, for debugging and the demo:
//
//   make k8s-up          (or: node --import tsx dev/up.ts)
//   kubectl --kubeconfig <printed path> get nodes,pods -A
//
// Stays up until Ctrl-C, then stops everything.
import { startStack } from './stack.js';

const stack = await startStack({ cluster: { keepDir: true } });
const c = stack.cluster;
process.stdout.write(
  [
    `Local cluster up in ${stack.startSeconds.toFixed(1)} s`,
    `  API server:   ${c.server}`,
    `  kubeconfig:   ${c.kubeconfigPath}`,
    `  kubectl:      ${c.kubectlPath} --kubeconfig ${c.kubeconfigPath} get pods -A`,
    `  local node:   ${stack.node?.name} (state in ${stack.node?.root}, log ${stack.nodeLog})`,
    `  logs:         ${c.dir}/logs`,
    'Ctrl-C stops it.',
    '',
  ].join('\n'),
);
let stopping = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    if (stopping) return;
    stopping = true;
    process.stdout.write('Stopping...\n');
    void stack.stop().then(() => process.exit(0));
  });
}
