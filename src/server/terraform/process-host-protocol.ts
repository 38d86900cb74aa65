// Messages between the process host (the server's main thread) and its worker process, which
// starts every child process of the server. Plain JSON over the IPC channel.

export interface SpawnSpec {
  command: string;
  args: string[];
  cwd: string;
  /** Added to the worker's environment (the server's, cleaned: see secrets/child-env.ts). */
  env?: Record<string, string>;
  /** Own process group (setsid): a signal to the server's group never reaches the child. */
  detached?: boolean;
  /** Default 'pipe' (execa's default). */
  stdin?: 'ignore' | 'pipe';
  /**
   * 'stream': stdout and stderr combined, sent in chunks as they come (nothing kept);
   * 'capture': stdout and stderr returned with the exit, final newline stripped.
   */
  output: 'stream' | 'capture';
}

export interface SpawnExit {
  exitCode: number | null;
  signal: string | null;
  durationMs: number;
  /** Set when the process never ran (e.g. binary missing) or was lost: what to tell the user. */
  error?: string;
  /** 'capture' only. */
  stdout?: string;
  stderr?: string;
}

export type ToWorker = { type: 'spawn'; id: number; spec: SpawnSpec };

export type FromWorker =
  | { type: 'started'; id: number; pid: number }
  | { type: 'output'; id: number; chunk: string }
  | { type: 'exit'; id: number; exit: SpawnExit }
  /** Sent just before the worker exits on an error of its own (a bug): what to log. */
  | { type: 'fatal'; error: string };
