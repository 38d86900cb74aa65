// A real local Kubernetes control plane: etcd, kube-apiserver and kube-controller-manager
// as local processes on free loopback ports (see docs/local-cluster.md).
//
//   const cluster = new LocalCluster();
//   await cluster.start();              // seconds, once the binaries exist
//   cluster.kubeconfigPath; cluster.server; await cluster.kubectl(['get', 'ns']);
//   await cluster.stop();
//
//   await cluster.stopApiServer();      // kube-apiserver alone (fault tests); etcd and
//   await cluster.restartApiServer();   // kube-controller-manager keep running; same port,
//                                       // flags, certs and etcd data; waits for /readyz
//
// kube-apiserver: secure port on 127.0.0.1, client-certificate authentication (admin user
// in system:masters), RBAC authorization, service-account issuer and keys (TokenRequest
// works), envtest-like flags. kube-controller-manager: garbage collector, namespace,
// service accounts (every namespace gets "default"), root CA publisher, PV/PVC protection
// and disruption controllers; no leader election.
import fs from 'node:fs/promises';
import { openSync, closeSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { type KubeClientConfig, kubeConfigFromFile, kubeconfigYaml } from '../src/k8s/kubeconfig.js';
import { sleep } from '../src/async.js';
import { httpRequest } from '../src/net/http-request.js';
import { kubeRequest } from '../src/k8s/client.js';
import { resolveBinaries, type BinaryName } from './binaries.js';
import { makePki, type PkiFiles } from './certs.js';
import { spawnGroup, type GroupProcess } from './procs.js';

export interface LocalClusterOptions {
  /** working directory (certs, etcd data, logs, kubeconfig); a fresh temp dir by default */
  dir?: string;
  /** keep the temp dir after stop() (a `dir` that was given is never removed) */
  keepDir?: boolean;
  /** extra kube-apiserver flags */
  apiServerFlags?: string[];
  /** how long start() may take before it fails (default 90 s) */
  startTimeoutMs?: number;
}

export interface KubectlResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

/** The controllers kube-controller-manager runs here. */
export const CONTROLLERS = [
  'garbage-collector-controller',
  'namespace-controller',
  'serviceaccount-controller',
  'serviceaccount-token-controller',
  'root-ca-certificate-publisher-controller',
  'persistentvolumeclaim-protection-controller',
  'persistentvolume-protection-controller',
  'disruption-controller',
];

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      s.close(() => resolve(port));
    });
  });
}

async function tail(file: string, lines = 30): Promise<string> {
  try {
    const text = await fs.readFile(file, 'utf8');
    return text.split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

export class LocalCluster {
  readonly dir: string;
  private readonly ownDir: boolean;
  private readonly opts: LocalClusterOptions;
  private procs: Array<{ name: string; proc: GroupProcess }> = [];
  private started = false;
  private _server = '';
  private _pki: PkiFiles | undefined;
  private _kc: KubeClientConfig | undefined;
  private bins: Record<BinaryName, string> | undefined;
  private apiPort = 0;
  private etcdPort = 0;
  /** seconds start() took, for reports */
  startSeconds = 0;

  constructor(opts: LocalClusterOptions = {}) {
    this.opts = opts;
    this.ownDir = !opts.dir;
    this.dir = opts.dir ?? '';
  }

  /** https://127.0.0.1:<port> of kube-apiserver. */
  get server(): string {
    return this._server;
  }
  get kubeconfigPath(): string {
    return path.join(this.dir, 'kubeconfig');
  }
  get pki(): PkiFiles {
    if (!this._pki) throw new Error('LocalCluster not started');
    return this._pki;
  }
  /** A KubeClientConfig for the admin user. */
  get kubeConfig(): KubeClientConfig {
    if (!this._kc) this._kc = kubeConfigFromFile(this.kubeconfigPath);
    return this._kc;
  }
  get kubectlPath(): string {
    return (this.bins ?? resolveBinaries()).kubectl;
  }
  logFile(component: 'etcd' | 'kube-apiserver' | 'kube-controller-manager'): string {
    return path.join(this.dir, 'logs', `${component}.log`);
  }

  async start(): Promise<void> {
    if (this.started) return;
    const t0 = Date.now();
    const deadline = t0 + (this.opts.startTimeoutMs ?? 90_000);
    this.bins = resolveBinaries();
    if (this.ownDir) (this as { dir: string }).dir = await fs.mkdtemp(path.join(os.tmpdir(), 'atlantis-k8s-'));
    await fs.mkdir(path.join(this.dir, 'logs'), { recursive: true });
    this.started = true;
    try {
      const [pki, etcdPort, peerPort, apiPort] = await Promise.all([
        makePki(path.join(this.dir, 'pki')),
        freePort(),
        freePort(),
        freePort(),
      ]);
      this._pki = pki;
      await this.startEtcd(etcdPort, peerPort, deadline);
      this.apiPort = apiPort;
      this.etcdPort = etcdPort;
      this._server = `https://127.0.0.1:${apiPort}`;
      await this.writeKubeconfig(this.kubeconfigPath, this._server);
      await this.startApiServer(apiPort, etcdPort, deadline);
      await this.startControllerManager(deadline);
      await this.waitFor(
        'the default ServiceAccount (kube-controller-manager)',
        deadline,
        async () => {
          const r = await kubeRequest(this.kubeConfig, 'GET', '/api/v1/namespaces/default/serviceaccounts/default');
          return r.status === 200;
        },
        'kube-controller-manager',
      );
      this.startSeconds = (Date.now() - t0) / 1000;
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  private spawn(name: BinaryName, args: string[]): GroupProcess {
    const log = path.join(this.dir, 'logs', `${name}.log`);
    const fd = openSync(log, 'a');
    const proc = spawnGroup(this.bins![name], args, { stdio: ['ignore', fd, fd], cwd: this.dir });
    closeSync(fd);
    // stop() stops in reverse order of this list: keep etcd first and kube-apiserver before
    // kube-controller-manager, also when kube-apiserver is restarted after the others
    const order: BinaryName[] = ['etcd', 'kube-apiserver', 'kube-controller-manager'];
    const at = this.procs.findIndex((p) => order.indexOf(p.name as BinaryName) > order.indexOf(name));
    if (at < 0) this.procs.push({ name, proc });
    else this.procs.splice(at, 0, { name, proc });
    return proc;
  }

  private async waitFor(
    what: string,
    deadline: number,
    check: () => Promise<boolean>,
    component?: 'etcd' | 'kube-apiserver' | 'kube-controller-manager',
  ): Promise<void> {
    let lastErr = '';
    for (let i = 0; Date.now() < deadline; i++) {
      const exited = this.procs.find((p) => !p.proc.isRunning());
      if (exited) {
        throw new Error(
          `${exited.name} exited while waiting for ${what}:\n${await tail(path.join(this.dir, 'logs', `${exited.name}.log`))}`,
        );
      }
      try {
        if (await check()) return;
      } catch (err) {
        lastErr = err instanceof Error ? err.message : String(err);
      }
      await sleep(Math.min(250, 25 * (i + 1)));
    }
    const logs = component ? `\n${component} log:\n${await tail(this.logFile(component))}` : '';
    throw new Error(`Timed out waiting for ${what}${lastErr ? ` (last error: ${lastErr})` : ''}${logs}`);
  }

  private async startEtcd(port: number, peerPort: number, deadline: number): Promise<void> {
    const client = `http://127.0.0.1:${port}`;
    const peer = `http://127.0.0.1:${peerPort}`;
    this.spawn('etcd', [
      `--data-dir=${path.join(this.dir, 'etcd')}`,
      '--name=default',
      `--listen-client-urls=${client}`,
      `--advertise-client-urls=${client}`,
      `--listen-peer-urls=${peer}`,
      `--initial-advertise-peer-urls=${peer}`,
      `--initial-cluster=default=${peer}`,
      '--unsafe-no-fsync=true',
      '--log-level=warn',
    ]);
    await this.waitFor(
      'etcd',
      deadline,
      async () =>
        (await httpRequest(`${client}/health`, { method: 'GET', headers: {}, timeoutMs: 2_000 })).text.includes('"health":"true"'),
      'etcd',
    );
  }

  /** True while the component's process runs (false after stopApiServer() for kube-apiserver). */
  isRunning(component: 'etcd' | 'kube-apiserver' | 'kube-controller-manager'): boolean {
    return this.procs.some((p) => p.name === component && p.proc.isRunning());
  }

  /**
   * Stops kube-apiserver alone (SIGTERM to its process group, SIGKILL after graceMs, default
   * 10 s) and resolves once it exited; etcd and kube-controller-manager keep running. For fault
   * tests: it stops listening at once on SIGTERM, so clients see refused connections on the
   * API server's port until restartApiServer(). (With clients' watches open its graceful
   * shutdown may not end by itself: the SIGKILL after graceMs ends it.)
   */
  async stopApiServer(opts: { graceMs?: number } = {}): Promise<void> {
    if (!this.started) throw new Error('LocalCluster not started');
    const i = this.procs.findIndex((p) => p.name === 'kube-apiserver');
    if (i < 0) throw new Error('kube-apiserver is not running (already stopped?)');
    const [entry] = this.procs.splice(i, 1);
    await entry!.proc.stop(opts.graceMs ?? 10_000);
  }

  /**
   * Starts kube-apiserver again after stopApiServer(): the same flags, port, certificates and
   * etcd (so every object is still there), its log appended to the same file. Resolves when
   * /readyz answers 200; throws (with the log's tail) when it does not within timeoutMs
   * (default 90 s), or when etcd or kube-controller-manager exited meanwhile.
   */
  async restartApiServer(opts: { timeoutMs?: number } = {}): Promise<void> {
    if (!this.started) throw new Error('LocalCluster not started');
    if (this.procs.some((p) => p.name === 'kube-apiserver')) throw new Error('kube-apiserver is already running');
    await this.startApiServer(this.apiPort, this.etcdPort, Date.now() + (opts.timeoutMs ?? 90_000));
  }

  private async startApiServer(port: number, etcdPort: number, deadline: number): Promise<void> {
    const pki = this.pki;
    this.spawn('kube-apiserver', [
      '--advertise-address=127.0.0.1',
      '--bind-address=127.0.0.1',
      `--secure-port=${port}`,
      `--etcd-servers=http://127.0.0.1:${etcdPort}`,
      `--cert-dir=${path.join(this.dir, 'apiserver-certs')}`,
      `--tls-cert-file=${pki.servingCert}`,
      `--tls-private-key-file=${pki.servingKey}`,
      `--client-ca-file=${pki.caCert}`,
      '--authorization-mode=RBAC',
      '--anonymous-auth=false',
      '--allow-privileged=true',
      '--service-cluster-ip-range=10.0.0.0/24',
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-account-key-file=${pki.saPub}`,
      `--service-account-signing-key-file=${pki.saKey}`,
      // the "kubernetes" Service's endpoints would point at a loopback address, which
      // Endpoints validation rejects: nothing in the cluster needs them
      '--endpoint-reconciler-type=none',
      ...(this.opts.apiServerFlags ?? []),
    ]);
    await this.waitFor(
      'kube-apiserver /readyz',
      deadline,
      async () => {
        const r = await kubeRequest(this.kubeConfig, 'GET', '/readyz', undefined, { timeoutMs: 2_000 });
        return r.status === 200;
      },
      'kube-apiserver',
    );
  }

  private async startControllerManager(_deadline: number): Promise<void> {
    const pki = this.pki;
    this.spawn('kube-controller-manager', [
      `--kubeconfig=${this.kubeconfigPath}`,
      '--leader-elect=false',
      `--controllers=${CONTROLLERS.join(',')}`,
      `--service-account-private-key-file=${pki.saKey}`,
      `--root-ca-file=${pki.caCert}`,
      '--use-service-account-credentials=false',
      // no serving port: nothing scrapes it, and delegated auth would need more config
      '--secure-port=0',
    ]);
  }

  private async writeKubeconfig(file: string, server: string): Promise<void> {
    const pki = this.pki;
    const b64 = async (f: string) => (await fs.readFile(f)).toString('base64');
    const text = kubeconfigYaml({
      name: 'local',
      server,
      caData: await b64(pki.caCert),
      user: { 'client-certificate-data': await b64(pki.adminCert), 'client-key-data': await b64(pki.adminKey) },
      namespace: 'default',
    });
    await fs.writeFile(file, text, { mode: 0o600 });
  }

  /** Runs kubectl against this cluster; never throws on a non-zero exit. */
  async kubectl(args: string[], opts: { input?: string; timeoutMs?: number } = {}): Promise<KubectlResult> {
    const r = await execa(this.kubectlPath, ['--kubeconfig', this.kubeconfigPath, ...args], {
      input: opts.input,
      reject: false,
      timeout: opts.timeoutMs ?? 60_000,
      env: { KUBECONFIG: this.kubeconfigPath },
    });
    return { stdout: String(r.stdout ?? ''), stderr: String(r.stderr ?? ''), exitCode: r.exitCode ?? 1 };
  }

  /** Stops kube-controller-manager, kube-apiserver and etcd (in that order) and removes the temp dir (unless keepDir). */
  async stop(opts: { keepDir?: boolean } = {}): Promise<void> {
    const procs = [...this.procs].reverse();
    this.procs = [];
    for (const p of procs) await p.proc.stop(5_000);
    this.started = false;
    if (this.dir && this.ownDir && !this.opts.keepDir && !opts.keepDir) {
      await fs.rm(this.dir, { recursive: true, force: true }).catch(() => {});
    }
  }
}
