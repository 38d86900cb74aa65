// Certificates and keys for the local control plane, made with the openssl CLI (EC P-256:
// fast to generate, accepted by every Kubernetes component).
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const OPENSSL = process.env.OPENSSL ?? 'openssl';

export interface PkiFiles {
  caCert: string;
  caKey: string;
  servingCert: string;
  servingKey: string;
  adminCert: string;
  adminKey: string;
  saKey: string;
  saPub: string;
}

async function openssl(args: string[], cwd: string): Promise<void> {
  try {
    await run(OPENSSL, args, { cwd, timeout: 30_000 });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`openssl ${args[0]} failed: ${e.stderr || e.message}`);
  }
}

async function ecKey(file: string, cwd: string): Promise<void> {
  await openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', file], cwd);
}

async function signedCert(dir: string, name: string, subject: string, ext: string, days = 3650): Promise<void> {
  await ecKey(`${name}.key`, dir);
  await openssl(['req', '-new', '-key', `${name}.key`, '-subj', subject, '-out', `${name}.csr`], dir);
  await fs.writeFile(path.join(dir, `${name}.ext`), ext);
  await openssl(
    [
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-days',
      String(days),
      '-sha256',
      '-extfile',
      `${name}.ext`,
      '-out',
      `${name}.crt`,
    ],
    dir,
  );
}

/** Writes a CA, the API server's serving cert (127.0.0.1, localhost), an admin client cert and the service-account key pair into `dir`. */
export async function makePki(dir: string): Promise<PkiFiles> {
  await fs.mkdir(dir, { recursive: true });
  await ecKey('ca.key', dir);
  await openssl(
    [
      'req',
      '-x509',
      '-new',
      '-key',
      'ca.key',
      '-subj',
      '/CN=atlantis-operator-local-ca',
      '-days',
      '3650',
      '-sha256',
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign,digitalSignature',
      '-out',
      'ca.crt',
    ],
    dir,
  );
  // serial file races if two signings run at once: keep them sequential, the SA key in parallel
  const sa = (async () => {
    await ecKey('sa.key', dir);
    await openssl(['pkey', '-in', 'sa.key', '-pubout', '-out', 'sa.pub'], dir);
  })();
  await signedCert(
    dir,
    'apiserver',
    '/CN=kube-apiserver',
    [
      'basicConstraints=CA:FALSE',
      'keyUsage=critical,digitalSignature,keyEncipherment',
      'extendedKeyUsage=serverAuth',
      'subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local',
      '',
    ].join('\n'),
  );
  await signedCert(
    dir,
    'admin',
    '/O=system:masters/CN=admin',
    ['basicConstraints=CA:FALSE', 'keyUsage=critical,digitalSignature,keyEncipherment', 'extendedKeyUsage=clientAuth', ''].join('\n'),
  );
  await sa;
  const f = (n: string) => path.join(dir, n);
  return {
    caCert: f('ca.crt'),
    caKey: f('ca.key'),
    servingCert: f('apiserver.crt'),
    servingKey: f('apiserver.key'),
    adminCert: f('admin.crt'),
    adminKey: f('admin.key'),
    saKey: f('sa.key'),
    saPub: f('sa.pub'),
  };
}
