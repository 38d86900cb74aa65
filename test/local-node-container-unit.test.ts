// The local node's container mode, its decisions without a cluster: which way an image runs,
// the `podman run` arguments a pod's securityContext, env, volumes and command give, and
// fsGroup on a volume (on a real directory tree).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { envFileOf, podmanRunArgs, type RunSpec } from '../dev/local-node/container-runtime.js';
import { applyFsGroup, fsGroupMode, rootMatches } from '../dev/local-node/fsgroup.js';
import { chooseMode, registryHost } from '../dev/local-node/images.js';
import { SetupError } from '../dev/local-node/types.js';

describe('which way an image runs', () => {
  it('registry hosts as Docker reads references', () => {
    const rows: Array<[string, string | undefined]> = [
      ['atlantis-operator:v2', undefined],
      ['acme/atlantis-operator:v2', undefined],
      ['localhost/atlantis-operator:0.1.0', 'localhost'],
      ['ghcr.io/acme/atlantis-operator:1.0.0', 'ghcr.io'],
      ['registry:5000/atlantis-operator', 'registry:5000'],
      ['docker.io/library/debian:trixie-slim', 'docker.io'],
    ];
    for (const [ref, host] of rows) assert.equal(registryHost(ref), host, ref);
  });

  it('local storage, the project build as a process, or an image the node does not have', () => {
    const local = { id: 'abc', user: '1000:1000' };
    const rows: Array<[string, string | undefined, typeof local | undefined, string]> = [
      ['localhost/atlantis-operator:0.1.0', undefined, local, 'container'],
      ['ghcr.io/acme/atlantis-operator:1.0.0', 'Always', local, 'container'],
      ['atlantis-operator:v2', undefined, undefined, 'process'],
      // A short name runs as a process even when podman could resolve it: the mode is in the manifest.
      ['atlantis-operator:0.1.0', undefined, local, 'process'],
      ['localhost/atlantis-operator:missing', undefined, undefined, 'ErrImageNeverPull'],
      ['ghcr.io/acme/atlantis-operator:1.0.0', 'Never', undefined, 'ErrImageNeverPull'],
      ['ghcr.io/acme/atlantis-operator:1.0.0', 'IfNotPresent', undefined, 'ErrImagePull'],
      ['nginx:1.27', undefined, undefined, 'ErrImagePull'],
      ['nginx:1.27', 'Never', undefined, 'ErrImageNeverPull'],
    ];
    for (const [image, policy, have, want] of rows) {
      const m = chooseMode(image, policy, 'atlantis-operator', have);
      assert.equal(m.kind === 'missing' ? m.reason : m.kind, want, `${image} ${policy ?? ''}`);
    }
    const never = chooseMode('localhost/x:1', undefined, 'atlantis-operator', undefined);
    assert.equal(never.kind === 'missing' && never.message, 'Container image "localhost/x:1" is not present with pull policy of Never');
  });
});

function spec(pod: Partial<NonNullable<V1Pod['spec']>>, c: Partial<V1Container> = {}, extra: Partial<RunSpec> = {}): RunSpec {
  return {
    name: 'ato-1-server-0',
    imageId: 'sha256id',
    imageUser: '1000:1000',
    pod: { metadata: { name: 'atlantis-0' }, spec: { containers: [], ...pod } },
    container: { name: 'server', image: 'localhost/atlantis-operator:0.1.0', ...c },
    env: { POD_NAME: 'atlantis-0' },
    envFile: '/pods/x/container-env/server.env',
    envFromClient: [],
    mounts: [],
    ownerPid: 42,
    ...extra,
  };
}

/** The value after each occurrence of a flag. */
const values = (args: string[], flag: string) => args.flatMap((a, i) => (a === flag ? [args[i + 1]!] : []));

describe('podman run arguments', () => {
  it("the controller's security settings: user, groups, read-only root, no capabilities, no_new_privs", () => {
    const a = podmanRunArgs(
      spec(
        { securityContext: { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000, supplementalGroups: [3000] } },
        {
          securityContext: {
            readOnlyRootFilesystem: true,
            allowPrivilegeEscalation: false,
            capabilities: { drop: ['ALL'], add: ['NET_BIND_SERVICE'] },
          },
        },
      ),
    );
    assert.deepEqual(values(a, '--user'), ['1000:1000']);
    assert.deepEqual(values(a, '--group-add'), ['1000', '3000']);
    assert.ok(a.includes('--read-only') && a.includes('--read-only-tmpfs=false'));
    assert.deepEqual(values(a, '--cap-drop'), ['all']);
    assert.deepEqual(values(a, '--cap-add'), ['NET_BIND_SERVICE']);
    assert.deepEqual(values(a, '--security-opt'), ['no-new-privileges']);
    assert.deepEqual(values(a, '--network'), ['host']);
    assert.deepEqual(values(a, '--hostname'), ['atlantis-0']);
    assert.deepEqual(values(a, '--runtime'), ['runc']);
    assert.deepEqual(values(a, '--label'), ['dev.atlantis-operator.owner-pid=42']);
    assert.equal(a.at(-1), 'sha256id', 'no command, no args: the image entrypoint and CMD');
  });

  it("the container's securityContext over the pod's; none: the image's user", () => {
    const a = podmanRunArgs(spec({ securityContext: { runAsUser: 1000, runAsGroup: 1000 } }, { securityContext: { runAsUser: 2000 } }));
    assert.deepEqual(values(a, '--user'), ['2000:1000']);
    assert.deepEqual(values(podmanRunArgs(spec({})), '--user'), []);
    assert.deepEqual(values(podmanRunArgs(spec({}, { securityContext: { seccompProfile: { type: 'Unconfined' } } })), '--security-opt'), [
      'seccomp=unconfined',
    ]);
  });

  it('runAsNonRoot is checked against the user that would run, as a kubelet does', () => {
    const refused: Array<[RunSpec, RegExp]> = [
      [spec({ securityContext: { runAsNonRoot: true, runAsUser: 0 } }), /will run as root/],
      [spec({ securityContext: { runAsNonRoot: true } }, {}, { imageUser: '' }), /will run as root/],
      [spec({ securityContext: { runAsNonRoot: true } }, {}, { imageUser: 'root' }), /non-numeric user \(root\)/],
      [spec({}, { securityContext: { runAsNonRoot: true } }, { imageUser: '0:0' }), /will run as root/],
    ];
    for (const [s, re] of refused) {
      assert.throws(
        () => podmanRunArgs(s),
        (e: unknown) => e instanceof SetupError && e.reason === 'CreateContainerConfigError' && re.test(e.message),
      );
    }
    assert.doesNotThrow(() => podmanRunArgs(spec({ securityContext: { runAsNonRoot: true } })), 'the image says 1000');
    assert.doesNotThrow(() => podmanRunArgs(spec({ securityContext: { runAsNonRoot: true, runAsUser: 1000 } }, {}, { imageUser: 'root' })));
  });

  it('command replaces the entrypoint, args the CMD, both with $(VAR) expanded; env by file; mounts with :ro', () => {
    const a = podmanRunArgs(
      spec(
        {},
        { command: ['atlantis-operator'], args: ['server', '--name=$(POD_NAME)', '$(UNSET)', '$$(POD_NAME)'], workingDir: '/work' },
        {
          envFromClient: ['KEY_PEM'],
          mounts: [
            { host: '/node/pv/ns/data', target: '/atlantis', readOnly: false },
            { host: '/node/pods/x/volumes/vcs', target: '/etc/vcs', readOnly: true },
          ],
        },
      ),
    );
    assert.deepEqual(values(a, '--entrypoint'), ['["atlantis-operator"]']);
    assert.deepEqual(a.slice(-5), ['sha256id', 'server', '--name=atlantis-0', '$(UNSET)', '$(POD_NAME)']);
    assert.deepEqual(values(a, '--workdir'), ['/work']);
    assert.deepEqual(values(a, '--env-file'), ['/pods/x/container-env/server.env']);
    assert.deepEqual(values(a, '--env'), ['KEY_PEM']);
    assert.deepEqual(values(a, '--volume'), ['/node/pv/ns/data:/atlantis', '/node/pods/x/volumes/vcs:/etc/vcs:ro']);
    assert.ok(!a.some((x) => x.includes('atlantis-0') && x.startsWith('POD_NAME')), 'no env value on the command line');
  });

  it('single-line values go to the env file, multi-line ones through podman’s own environment', () => {
    const { text, fromClient } = envFileOf({ A: '1', B: 'x=y z', KEY_PEM: '-----BEGIN-----\nabc\n-----END-----\n', C: '' });
    assert.equal(text, 'A=1\nB=x=y z\nC=\n');
    assert.deepEqual(fromClient, ['KEY_PEM']);
  });
});

describe('fsGroup on a volume', () => {
  it('modes: group read-write (read-only on read-only volumes), directories setgid and searchable', () => {
    assert.equal(fsGroupMode(0o600, false, false), 0o660);
    assert.equal(fsGroupMode(0o700, true, false), 0o2770);
    assert.equal(fsGroupMode(0o644, false, true), 0o644);
    assert.equal(fsGroupMode(0o600, false, true), 0o640);
    assert.equal(fsGroupMode(0o755, true, true), 0o2755);
    assert.equal(rootMatches(2000, 0o2770, 2000, false), true);
    assert.equal(rootMatches(1000, 0o2770, 2000, false), false);
    assert.equal(rootMatches(2000, 0o0770, 2000, false), false, 'no setgid');
  });

  it("a tree written by one user becomes the group's; OnRootMismatch skips a root already right", () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'fsgroup-'));
    fs.mkdirSync(path.join(root, 'repos/acme'), { recursive: true, mode: 0o700 });
    fs.writeFileSync(path.join(root, 'repos/acme/state'), 'x', { mode: 0o600 });
    fs.writeFileSync(path.join(root, 'db'), 'x', { mode: 0o600 });
    fs.symlinkSync('db', path.join(root, 'link'));
    for (const p of ['repos', 'repos/acme', 'repos/acme/state', 'db']) fs.chownSync(path.join(root, p), 1000, 1000);
    fs.chmodSync(path.join(root, 'repos'), 0o700);

    assert.ok(applyFsGroup(root, 2000) > 0);
    for (const [p, mode] of [
      ['', 0o2770],
      ['repos', 0o2770],
      ['repos/acme', 0o2770],
      ['repos/acme/state', 0o660],
      ['db', 0o660],
    ] as const) {
      const st = fs.statSync(path.join(root, p));
      assert.equal(st.gid, 2000, p);
      assert.equal(st.mode & 0o7777, mode, `${p}: ${(st.mode & 0o7777).toString(8)}`);
      if (p !== '') assert.equal(st.uid, 1000, `${p} keeps its owner`);
    }
    assert.equal(fs.lstatSync(path.join(root, 'link')).gid, 2000, 'a symlink gets the group too');
    // Already right at the root: OnRootMismatch walks nothing (a file changed below stays as it is).
    fs.chmodSync(path.join(root, 'db'), 0o600);
    assert.equal(applyFsGroup(root, 2000, { policy: 'OnRootMismatch' }), 0);
    assert.equal(fs.statSync(path.join(root, 'db')).mode & 0o777, 0o600);
    assert.ok(applyFsGroup(root, 2000, { policy: 'Always' }) > 0);
    assert.equal(fs.statSync(path.join(root, 'db')).mode & 0o777, 0o660);
    fs.rmSync(root, { recursive: true, force: true });
  });
});
