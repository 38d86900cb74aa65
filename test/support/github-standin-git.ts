// The parts of the GitHub stand-in that let a real Atlantis (a GitHub Enterprise client over
// HTTPS) use it: a self-signed certificate for the stand-in's loopback address, git's own
// smart-HTTP server (`git http-backend`, as CGI: git-http-backend.ts) for clones of the test's repos, and the
// contents API read from those repos.
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import type http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gitHttpBackend } from './git-http-backend.js';

export interface CertFiles {
  dir: string;
  certFile: string;
  keyFile: string;
}

/**
 * A one-day self-signed certificate whose only name is the IP address `ip` (an IP SAN): made
 * by openssl when it is on PATH, else by `nodeSelfSignedCert`.
 */
export function selfSignedCert(ip: string): CertFiles {
  const dir = mkdtempSync(path.join(tmpdir(), 'standin-tls-'));
  const certFile = path.join(dir, 'cert.pem');
  const keyFile = path.join(dir, 'key.pem');
  const args = ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '1'];
  args.push('-subj', `/CN=${ip}`, '-addext', `subjectAltName=IP:${ip}`, '-addext', 'basicConstraints=critical,CA:TRUE');
  try {
    execFileSync('openssl', args, { stdio: 'pipe' });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT')
      throw new Error(`openssl could not make the stand-in's certificate: ${(e as Error).message}`);
    const made = nodeSelfSignedCert(ip);
    writeFileSync(certFile, made.cert);
    writeFileSync(keyFile, made.key, { mode: 0o600 });
  }
  if (!existsSync(certFile)) throw new Error('no certificate was made for the stand-in');
  return { dir, certFile, keyFile };
}

// DER, just the parts an X.509 certificate needs.
function der(tag: number, content: Buffer): Buffer {
  const n = content.length;
  const len = n < 0x80 ? Buffer.from([n]) : n < 0x100 ? Buffer.from([0x81, n]) : Buffer.from([0x82, n >> 8, n & 0xff]);
  return Buffer.concat([Buffer.from([tag]), len, content]);
}
const seq = (...parts: Buffer[]): Buffer => der(0x30, Buffer.concat(parts));
function oid(dotted: string): Buffer {
  const [a, b, ...rest] = dotted.split('.').map(Number);
  const bytes = [a! * 40 + b!];
  for (const v of rest) {
    const chunk = [v & 0x7f];
    for (let x = v >> 7; x > 0; x >>= 7) chunk.unshift((x & 0x7f) | 0x80);
    bytes.push(...chunk);
  }
  return der(0x06, Buffer.from(bytes));
}
function utcTime(d: Date): Buffer {
  const iso = d.toISOString(); // YYYY-MM-DDTHH:MM:SS.sssZ
  return der(
    0x17,
    Buffer.from(`${iso.slice(2, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}Z`),
  );
}

/** The same certificate as openssl's (P-256 key, ECDSA-SHA256), built with node's crypto alone. */
export function nodeSelfSignedCert(ip: string): { cert: string; key: string } {
  const { publicKey, privateKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const ecdsaSha256 = seq(oid('1.2.840.10045.4.3.2'));
  const name = seq(der(0x31, seq(oid('2.5.4.3'), der(0x0c, Buffer.from(ip)))));
  const ipBytes = Buffer.from(ip.split('.').map(Number));
  const san = seq(oid('2.5.29.17'), der(0x04, seq(der(0x87, ipBytes))));
  const caTrue = seq(oid('2.5.29.19'), der(0x01, Buffer.from([0xff])), der(0x04, seq(der(0x01, Buffer.from([0xff])))));
  const now = Date.now();
  const tbs = seq(
    der(0xa0, der(0x02, Buffer.from([2]))),
    der(0x02, Buffer.concat([Buffer.from([0x01]), crypto.randomBytes(15)])),
    ecdsaSha256,
    name,
    seq(utcTime(new Date(now - 60_000)), utcTime(new Date(now + 86_400_000))),
    name,
    publicKey.export({ type: 'spki', format: 'der' }),
    der(0xa3, seq(san, caTrue)),
  );
  const signature = crypto.sign('sha256', tbs, privateKey);
  const cert = seq(tbs, ecdsaSha256, der(0x03, Buffer.concat([Buffer.from([0]), signature])));
  const pem = (cert.toString('base64').match(/.{1,64}/g) ?? []).join('\n');
  return {
    cert: `-----BEGIN CERTIFICATE-----\n${pem}\n-----END CERTIFICATE-----\n`,
    key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}

/**
 * The password of an `Authorization: Basic` header, which is where a git client (and a
 * go-github client with a user token) puts the token; GitHub ignores the user name then.
 */
export function basicPassword(header: string | undefined): string | undefined {
  const m = /^Basic\s+(\S+)$/i.exec(header ?? '');
  if (!m) return undefined;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? undefined : decoded.slice(colon + 1);
}

/**
 * Answers one smart-HTTP request (`/<owner>/<name>.git/info/refs?service=…`,
 * `…/git-upload-pack`) from the bare repository `bareDir` with git http-backend
 * (git-http-backend.ts). Pushes are refused: the stand-in's repos change only through the test.
 */
export function serveGit(req: http.IncomingMessage, res: http.ServerResponse, bareDir: string, rest: string, query: string): void {
  gitHttpBackend(req, res, { projectRoot: path.dirname(bareDir), pathInfo: `/${path.basename(bareDir)}${rest}`, query });
}

/** GitHub's contents-API answer for `file` at `ref` (a branch, tag or SHA) of `bareDir`, or 404 (also for a directory, which the stand-in does not list). */
export function contentsAnswer(
  bareDir: string,
  file: string,
  ref: string | undefined,
  apiUrl: string,
  fullName: string,
): [number, unknown] {
  const rev = ref && /^[\w./-]+$/.test(ref) && !ref.startsWith('-') ? ref : 'HEAD';
  if (!/^[\w./-]+$/.test(file) || file.split('/').includes('..')) return [404, { message: 'Not Found' }];
  let blob: string;
  let content: Buffer;
  try {
    const opts = { cwd: bareDir, stdio: 'pipe' as const, env: { PATH: process.env.PATH, GIT_CONFIG_NOSYSTEM: '1' } };
    blob = execFileSync('git', ['rev-parse', '--verify', '--quiet', `${rev}:${file}`], opts)
      .toString()
      .trim();
    if (execFileSync('git', ['cat-file', '-t', blob], opts).toString().trim() !== 'blob') return [404, { message: 'Not Found' }];
    content = execFileSync('git', ['cat-file', 'blob', blob], { ...opts, maxBuffer: 64 * 1024 * 1024 });
  } catch {
    return [404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest/repos/contents#get-repository-content' }];
  }
  // GitHub wraps the base64 text at 60 characters; over 1 MB it leaves the content out.
  const b64 = (content.toString('base64').match(/.{1,60}/g) ?? []).join('\n');
  const whole = content.length <= 1024 * 1024;
  return [
    200,
    {
      type: 'file',
      encoding: whole ? 'base64' : 'none',
      size: content.length,
      name: path.posix.basename(file),
      path: file,
      content: whole ? `${b64}\n` : '',
      sha: blob,
      url: `${apiUrl}/repos/${fullName}/contents/${file}?ref=${rev}`,
    },
  ];
}
