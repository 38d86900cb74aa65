// Starts the process host worker from its TypeScript source (tests and dev run src/ under
// `node --import tsx`): the worker process is started without the server's --import flags,
// so it registers tsx here before loading the .ts module.
import { register } from 'tsx/esm/api';

register();
await import('./process-host-worker.ts');
