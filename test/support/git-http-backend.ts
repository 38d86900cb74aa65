// git's own smart-HTTP server (`git http-backend`, run as CGI) behind a node:http handler: the
// one bridge the test servers share (the GitHub stand-in's clones, and through it the GitLab
// stand-in's; the HTTPS git server of git-https.ts). Pushes are refused: the repositories change
// only through the tests.
import { type ChildProcess, spawn } from 'node:child_process';
import type http from 'node:http';

export interface GitBackendTarget {
  /** The directory the repositories are under (GIT_PROJECT_ROOT). */
  projectRoot: string;
  /** The request's path under projectRoot: `/<owner>/<name>.git/info/refs`, `/<name>.git/git-upload-pack`. */
  pathInfo: string;
  /** The query string without `?`. */
  query: string;
  /** Who git's server side thinks asked (REMOTE_USER). */
  remoteUser?: string;
}

/** Answers one smart-HTTP request with git http-backend. */
export function gitHttpBackend(req: http.IncomingMessage, res: http.ServerResponse, t: GitBackendTarget): void {
  if (/git-receive-pack/.test(t.pathInfo) || /service=git-receive-pack/.test(t.query)) {
    res.writeHead(403, { 'content-type': 'text/plain' }).end('pushes are not served\n');
    return;
  }
  const cgi: ChildProcess = spawn('git', ['http-backend'], {
    env: {
      PATH: process.env.PATH,
      GIT_PROJECT_ROOT: t.projectRoot,
      GIT_HTTP_EXPORT_ALL: '1',
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: '/dev/null',
      PATH_INFO: t.pathInfo,
      QUERY_STRING: t.query,
      REQUEST_METHOD: req.method ?? 'GET',
      CONTENT_TYPE: req.headers['content-type'] ?? '',
      REMOTE_USER: t.remoteUser ?? 'git',
      REMOTE_ADDR: req.socket.remoteAddress ?? '127.0.0.1',
      ...(req.headers['content-encoding'] ? { HTTP_CONTENT_ENCODING: String(req.headers['content-encoding']) } : {}),
      ...(req.headers['git-protocol'] ? { GIT_PROTOCOL: String(req.headers['git-protocol']) } : {}),
    },
    stdio: ['pipe', 'pipe', 'ignore'],
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
      const colon = line.indexOf(':');
      const k = line.slice(0, colon).trim();
      const v = line.slice(colon + 1).trim();
      if (k.toLowerCase() === 'status') status = Number(v.split(' ')[0]);
      else headers[k] = v;
    }
    res.writeHead(status, headers);
    res.write(head.subarray(end + 4));
  });
  cgi.stdout!.on('end', () => {
    if (!headersDone) res.writeHead(500).end();
    else res.end();
  });
  cgi.on('error', () => {
    if (!res.headersSent) res.writeHead(500).end();
  });
}
