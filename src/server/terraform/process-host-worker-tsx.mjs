// Starts the process host worker from its TypeScript source (tests and dev run src/ under
// `node --import tsx`): tsx's --import hook registers itself in the main thread only, so the
// worker thread registers it here before loading the .ts module.
import { register } from 'tsx/esm/api';

register();
await import('./process-host-worker.ts');
