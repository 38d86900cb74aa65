// Runs a command with one shared local cluster + local node (make test, make bench):
//
//   node --import tsx dev/with-cluster.ts -- node --import tsx --test test/a.test.ts ...
//
// exports ATLANTIS_TEST_KUBECONFIG (admin kubeconfig), ATLANTIS_TEST_NODE_ROOT (the local
// node's state dir: pods/, pv/, events.jsonl) and ATLANTIS_TEST_NODE_NAME to the command,
// exits with its exit code, and always stops the cluster (also on SIGINT/SIGTERM).
// A cluster that cannot start (e.g. missing binaries) fails the run with the reason.
// ATLANTIS_KEEP_CLUSTER_DIR=1 keeps the cluster dir (logs, node state) for post-mortems.
// ATLANTIS_LOCAL_NODE_POD_CPU_SHARES=<n> sets the cpu.shares of the cgroup the local node puts
// every pod under (default: kubelet's, 1024 per core; docs/local-cluster.md).
//
//   node --import tsx dev/with-cluster.ts --serve
//
// starts the same stack for a parent process that spawned it with an IPC channel (the
// test helpers do this when no shared cluster is set): sends {ready: {...}} and stops
// everything when the channel closes.
import { spawn } from 'node:child_process';
import { ENV_KUBECONFIG, ENV_NODE_NAME, ENV_NODE_ROOT, startStack, type Stack } from './stack.js';

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  const serve = argv[0] === '--serve';
  const sep = argv.indexOf('--');
  const cmd = sep >= 0 ? argv.slice(sep + 1) : [];
  if (!serve && cmd.length === 0) {
    process.stderr.write('usage: with-cluster.ts -- <command> [args...] | --serve\n');
    return 2;
  }
  let stack: Stack | undefined;
  let stopping = false;
  const stopAll = async (code: number) => {
    if (stopping) return;
    stopping = true;
    await stack?.stop().catch(() => {});
    process.exit(code);
  };
  try {
    // CrashLoopBackOff starts at 1 s here (kubelet: 10 s) so restart tests stay short.
    const podCpuShares = process.env.ATLANTIS_LOCAL_NODE_POD_CPU_SHARES
      ? Number(process.env.ATLANTIS_LOCAL_NODE_POD_CPU_SHARES)
      : undefined;
    if (podCpuShares !== undefined && !(Number.isInteger(podCpuShares) && podCpuShares >= 2 && podCpuShares <= 262_144))
      throw new Error(
        `ATLANTIS_LOCAL_NODE_POD_CPU_SHARES must be an integer from 2 to 262144, got "${process.env.ATLANTIS_LOCAL_NODE_POD_CPU_SHARES}"`,
      );
    stack = await startStack({
      cluster: { keepDir: process.env.ATLANTIS_KEEP_CLUSTER_DIR === '1' },
      node: { crashBackoffBaseMs: 1_000, podCpuShares },
    });
  } catch (err) {
    process.stderr.write(`with-cluster: FAILED to start the local cluster: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
  const info = {
    kubeconfig: stack.cluster.kubeconfigPath,
    nodeRoot: stack.node?.root ?? '',
    nodeName: stack.node?.name ?? '',
    server: stack.cluster.server,
    dir: stack.cluster.dir,
    startSeconds: stack.startSeconds,
  };
  if (serve) {
    if (!process.send) {
      process.stderr.write('with-cluster --serve needs an IPC channel\n');
      await stack.stop();
      return 2;
    }
    process.on('disconnect', () => void stopAll(0));
    process.on('SIGTERM', () => void stopAll(143));
    process.on('SIGINT', () => void stopAll(130));
    process.send({ ready: info });
    return new Promise<number>(() => {});
  }
  process.stderr.write(
    `with-cluster: local cluster up in ${stack.startSeconds.toFixed(1)} s at ${info.server} (kubeconfig ${info.kubeconfig})\n`,
  );
  const child = spawn(cmd[0]!, cmd.slice(1), {
    stdio: 'inherit',
    env: { ...process.env, [ENV_KUBECONFIG]: info.kubeconfig, [ENV_NODE_ROOT]: info.nodeRoot, [ENV_NODE_NAME]: info.nodeName },
  });
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.on(sig, () => {
      child.kill(sig);
      setTimeout(() => void stopAll(sig === 'SIGINT' ? 130 : 143), 10_000).unref();
    });
  }
  const code = await new Promise<number>((resolve) => {
    child.on('error', (e) => {
      process.stderr.write(`with-cluster: cannot run ${cmd[0]}: ${e.message}\n`);
      resolve(127);
    });
    child.on('exit', (c, s) => resolve(c ?? (s ? 128 + 15 : 1)));
  });
  if (code !== 0)
    process.stderr.write(`with-cluster: command failed (exit ${code}); cluster logs and local node state kept in ${info.dir}\n`);
  await stack.stop({ keepDir: code !== 0 });
  return code;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`with-cluster: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
