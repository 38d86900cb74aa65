// A git server over HTTPS for tests, as GitHub serves private repositories: TLS with a
// certificate made for the test's 127.x address (children trust it through GIT_SSL_CAINFO),
// HTTP Basic auth, and git's own `git http-backend` behind it as CGI.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';

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
    const cgi: ChildProcess = spawn('git', ['http-backend'], {
      env: {
        PATH: process.env.PATH,
        GIT_PROJECT_ROOT: opts.projectRoot,
        GIT_HTTP_EXPORT_ALL: '1',
        PATH_INFO: u.pathname,
        QUERY_STRING: u.search.slice(1),
        REQUEST_METHOD: req.method,
        CONTENT_TYPE: req.headers['content-type'] ?? '',
        REMOTE_USER: 'user',
        REMOTE_ADDR: opts.host,
        ...(req.headers['content-encoding'] ? { HTTP_CONTENT_ENCODING: req.headers['content-encoding'] } : {}),
        ...(req.headers['git-protocol'] ? { GIT_PROTOCOL: String(req.headers['git-protocol']) } : {}),
      },
    });
    req.pipe(cgi.stdin!);
    let head = Buffer.alloc(0);
    let headersDone = false;
    cgi.stdout!.on('data', (chunk: Buffer) => {
      if (headersDone) return void res.write(chunk);
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      headersDone = true;
      let status = 200;
      const headers: Record<string, string> = {};
      for (const line of head.subarray(0, end).toString().split('\r\n')) {
        const [k, ...v] = line.split(':');
        if (k!.toLowerCase() === 'status') status = Number(v.join(':').trim().split(' ')[0]);
        else headers[k!] = v.join(':').trim();
      }
      res.writeHead(status, headers);
      res.write(head.subarray(end + 4));
    });
    cgi.stdout!.on('end', () => res.end());
  });
  server.listen(0, opts.host);
  await new Promise((r) => server.once('listening', r));
  const hostPort = `${opts.host}:${(server.address() as AddressInfo).port}`;
  return { url: `https://${hostPort}`, hostPort, authSeen, caFile: cert, close: () => server.close() };
}
