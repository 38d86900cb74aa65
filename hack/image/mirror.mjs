// A static file server on 127.0.0.1 for the image build's terraform download (hack/image/build.sh):
//   node hack/image/mirror.mjs <dir>     prints its base URL on the first line, serves until SIGTERM
// Serves the files of <dir> and its subdirectories, GET/HEAD only, nothing outside <dir>.
import { createReadStream, statSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';

const root = path.resolve(process.argv[2] ?? '.');
const server = http.createServer((req, res) => {
  const rel = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
  const file = path.join(root, path.normalize(rel));
  const st = file.startsWith(root + path.sep) ? statSync(file, { throwIfNoEntry: false }) : undefined;
  if ((req.method !== 'GET' && req.method !== 'HEAD') || !st?.isFile()) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { 'content-length': st.size, 'content-type': 'application/octet-stream' });
  if (req.method === 'HEAD') res.end();
  else createReadStream(file).pipe(res);
});
server.listen(0, '127.0.0.1', () => {
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  process.stdout.write(`http://127.0.0.1:${port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
