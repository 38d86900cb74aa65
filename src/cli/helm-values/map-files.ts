// Files the chart mounts into Atlantis's container: ~/.gitconfig, ~/.netrc, AWS credentials,
// a CA bundle, Google service account keys, and the init container that installs tools into
// a shared directory (initConfig). A file with credentials is mounted from a Secret (the one
// the values name, else one to create with the chart's keys); its content is never copied.
// The image's home is /home/atlantis as in Atlantis's image, so the chart's paths hold. Pure.
import type { V1Container, V1SecurityContext } from '@kubernetes/client-node';
import { judgeFlag } from './flags.js';
import { asK8s, type Conversion, type SecretSource } from './conversion.js';
import { isObj, type Obj, truthy, ValuesError, type Values } from './values.js';

const HOME = '/home/atlantis';

/** A Secret key mounted as one file (subPath), read-only. */
function secretFile(c: Conversion, volume: string, src: SecretSource, key: string, holds: string, mountPath: string): void {
  c.secretRef(src, key, holds);
  c.volumes.push({ name: volume, secret: { secretName: src.name } });
  c.mounts.push({ name: volume, mountPath, subPath: key, readOnly: true });
}

export function mapFiles(v: Values, c: Conversion): void {
  const gitconfig = v.str('gitconfig');
  const gitconfigSecret = v.str('gitconfigSecretName');
  const gitconfigReadOnly = v.bool('gitconfigReadOnly');
  if (gitconfig || gitconfigSecret) {
    const src = gitconfigSecret ? { name: gitconfigSecret, create: false } : c.newSecret('gitconfig-file', 'gitconfig');
    secretFile(c, 'gitconfig-volume', src, 'gitconfig', '~/.gitconfig (gitconfig)', `${HOME}/.gitconfig`);
    if (gitconfigReadOnly === false)
      c.note(
        'gitconfigReadOnly',
        "mounted read-only at ~/.gitconfig all the same: the chart's copy runs from the Atlantis image's entrypoint, which this image does not have; this server writes its git credentials elsewhere (--write-git-creds)",
      );
  }
  const netrc = v.str('netrc');
  const netrcSecret = v.str('netrcSecretName');
  if (netrc || netrcSecret) {
    const src = netrcSecret ? { name: netrcSecret, create: false } : c.newSecret('netrc-file', 'netrc');
    secretFile(c, 'netrc-volume', src, 'netrc', '~/.netrc (netrc)', `${HOME}/.netrc`);
  }
  mapAws(v, c);
  mapCerts(v, c);
  mapGoogle(v, c);
  mapInitConfig(v, c);
  const csc = v.obj('containerSecurityContext');
  if (truthy(csc)) c.pod.containerSecurityContext = asK8s<V1SecurityContext>(csc);
  // As the chart: a read-only root filesystem gets writable home and /tmp.
  if (csc.readOnlyRootFilesystem === true) {
    c.volumes.push({ name: 'atlantis-home-dir', emptyDir: {} }, { name: 'tmp-dir', emptyDir: {} });
    c.mounts.push({ name: 'atlantis-home-dir', mountPath: HOME }, { name: 'tmp-dir', mountPath: '/tmp' });
  }
}

function mapAws(v: Values, c: Conversion): void {
  const credentials = v.str('aws', 'credentials');
  const config = v.str('aws', 'config');
  const dir = v.str('aws', 'directory');
  const named = v.str('awsSecretName');
  if (dir) {
    c.settingsEnv.push(
      { name: 'AWS_SHARED_CREDENTIALS_FILE', value: `${dir}/credentials` },
      { name: 'AWS_CONFIG_FILE', value: `${dir}/config` },
    );
  }
  if (!credentials && !config && !named) return;
  const src: SecretSource = named ? { name: named, create: false } : c.newSecret('aws-files', 'aws');
  if (named) c.secretWhole(src, 'the AWS files: credentials and config');
  if (!named && credentials) c.secretRef(src, 'credentials', 'the AWS credentials file (aws.credentials)');
  if (!named && config) c.secretRef(src, 'config', 'the AWS config file (aws.config)');
  c.volumes.push({ name: 'aws-volume', secret: { secretName: src.name } });
  c.mounts.push({ name: 'aws-volume', mountPath: dir || `${HOME}/.aws`, readOnly: true });
}

function mapCerts(v: Values, c: Conversion): void {
  const tls = v.str('tlsSecretName');
  if (tls) {
    const verdict = judgeFlag('ssl-cert-file', '/etc/tls/tls.crt');
    c.notMapped('tlsSecretName', verdict.kind === 'unmapped' ? verdict.reason : 'not carried over');
  }
  const pem = v.str('customPem');
  if (!pem) return;
  c.volumes.push({ name: 'additional-trust-certs', secret: { secretName: pem } });
  c.mounts.push({ name: 'additional-trust-certs', mountPath: '/etc/ssl/certs/ca-certificates.crt', subPath: 'ca-certificates.crt' });
  c.secretRef({ name: pem, create: false }, 'ca-certificates.crt', 'the CA bundle (customPem)');
  // git and terraform read the system bundle; Node.js, which runs the server, its own roots plus this variable.
  c.settingsEnv.push({ name: 'NODE_EXTRA_CA_CERTS', value: '/etc/ssl/certs/ca-certificates.crt' });
  c.note('customPem', 'the server is Node.js, which reads the bundle through NODE_EXTRA_CA_CERTS (set here) besides its own roots');
}

function mapGoogle(v: Values, c: Conversion): void {
  v.list(['googleServiceAccountSecrets'], 'mapping').forEach((x, i) => {
    const o = x as Obj;
    if (typeof o.name !== 'string' || typeof o.secretName !== 'string')
      throw new ValuesError(`googleServiceAccountSecrets[${i}] must be {name, secretName}`);
    c.volumes.push({ name: o.name, secret: { secretName: o.secretName } });
    c.mounts.push({ name: o.name, mountPath: `/var/secrets/${o.name}`, readOnly: true });
    c.secretWhole(
      { name: o.secretName, create: false },
      `Google service account keys (googleServiceAccountSecrets[${i}]), mounted at /var/secrets/${o.name}`,
    );
  });
  for (const [name, x] of Object.entries(v.obj('serviceAccountSecrets'))) {
    if (typeof x !== 'string') throw new ValuesError(`serviceAccountSecrets.${name} must be a string`);
    // The chart made a Secret of that name holding the key; here one to create takes its place.
    const src: SecretSource = { ...c.newSecret(`gcp-${name}`), chartSecret: name };
    c.secretRef(src, 'service-account.json', `the service account key (serviceAccountSecrets.${name})`);
    c.volumes.push({ name: `${name}-volume`, secret: { secretName: src.name } });
    c.mounts.push({ name: `${name}-volume`, mountPath: `/etc/${name}`, readOnly: true });
  }
}

/** initConfig: the chart's init container that downloads tools into a directory shared with Atlantis. */
function mapInitConfig(v: Values, c: Conversion): void {
  const enabled = v.bool('initConfig', 'enabled');
  const image = v.str('initConfig', 'image');
  v.str('initConfig', 'imagePullPolicy');
  const sharedDir = v.str('initConfig', 'sharedDir') ?? '/plugins';
  const readOnly = v.bool('initConfig', 'sharedDirReadOnly');
  const workDir = v.str('initConfig', 'workDir');
  const sizeLimit = v.get('initConfig', 'sizeLimit');
  const csc = v.obj('initConfig', 'containerSecurityContext');
  const script = v.str('initConfig', 'script') ?? '';
  if (!enabled) return;
  const cm = c.configMap('init-script', { 'init-config.sh': script });
  c.volumes.push(
    { name: 'init-config', configMap: { name: cm, items: [{ key: 'init-config.sh', path: 'init-config.sh', mode: 0o555 }] } },
    { name: 'init-shared-path', emptyDir: { ...(sizeLimit !== undefined ? { sizeLimit: String(sizeLimit) } : {}) } },
  );
  c.mounts.push({ name: 'init-shared-path', mountPath: sharedDir, readOnly: readOnly ?? true });
  const container: V1Container = {
    name: 'init-config',
    ...(image ? { image } : {}),
    command: ['/init-config.sh'],
    ...(workDir ? { workingDir: workDir } : {}),
    env: [
      { name: 'PATH', value: `/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:${sharedDir}` },
      { name: 'INIT_SHARED_DIR', value: sharedDir },
    ],
    volumeMounts: [
      { name: 'init-config', mountPath: '/init-config.sh', subPath: 'init-config.sh' },
      { name: 'init-shared-path', mountPath: sharedDir },
    ],
    ...(isObj(csc) && truthy(csc) ? { securityContext: asK8s<V1SecurityContext>(csc) } : {}),
  };
  c.pod.initContainers = [...(c.pod.initContainers ?? []), container];
  c.settingsEnv.push({ name: 'INIT_SHARED_DIR', value: sharedDir });
}
