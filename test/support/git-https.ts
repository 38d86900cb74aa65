// A git server over HTTPS for tests, as GitHub serves private repositories: TLS with a
// certificate made for the test's 127.x address (children trust it through GIT_SSL_CAINFO),
// HTTP Basic auth, and git's own `git http-backend` behind it as CGI (git-http-backend.ts).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { gitHttpBackend } from './git-http-backend.js';

export interface GitHttpsServer {
  /** https://<host>:<port> */
  url: string;
  /** host:port, as git's credential helpers name it. */
  hostPort: string;
  /** The user:password of every Authorization header seen, decoded. */
  authSeen: string[];
  /** The CA file git must trust (set GIT_SSL_CAINFO to it). */
  caFile: string;
  close(): void;
}

export async function startGitHttps(opts: {
  host: string;
  /** Dir holding `<owner>/<name>.git` bare repos. */
  projectRoot: string;
  /** Where the key and certificate are written. */
  certDir: string;
  /** Whether a user:password (decoded from Basic auth) may read. */
  accept: (userPassword: string) => boolean;
}): Promise<GitHttpsServer> {
  const key = path.join(opts.certDir, 'key.pem');
  const cert = path.join(opts.certDir, 'cert.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '1',
      '-subj',
      `/CN=${opts.host}`,
      '-addext',
      `subjectAltName=IP:${opts.host}`,
    ],
    { stdio: 'ignore' },
  );
  const authSeen: string[] = [];
  const server = https.createServer({ key: readFileSync(key), cert: readFileSync(cert) }, (req, res) => {
    const auth = req.headers.authorization;
    const userPassword = auth?.startsWith('Basic ') ? Buffer.from(auth.slice(6), 'base64').toString() : undefined;
    if (userPassword !== undefined) authSeen.push(userPassword);
    if (userPassword === undefined || !opts.accept(userPassword)) {
      res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="GitHub"' }).end('auth required\n');
      return;
    }
    const u = new URL(req.url ?? '/', `https://${opts.host}`);
    gitHttpBackend(req, res, { projectRoot: opts.projectRoot, pathInfo: u.pathname, query: u.search.slice(1), remoteUser: 'user' });
  });
  server.listen(0, opts.host);
  await new Promise((r) => server.once('listening', r));
  const hostPort = `${opts.host}:${(server.address() as AddressInfo).port}`;
  return { url: `https://${hostPort}`, hostPort, authSeen, caFile: cert, close: () => server.close() };
}
