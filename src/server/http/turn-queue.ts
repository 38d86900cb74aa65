// Runs queued tasks a few milliseconds of each event-loop turn, so that the I/O between them
// (a /status probe, a kubelet's readiness check, GitHub's answers) is served in between.
//
// Why: the server handles webhooks on the event loop that answers /status. A webhook handler is
// short (signature, parse, decide, answer), but GitHub delivers in bursts: with many webhooks
// arriving in one turn, their handlers would run back to back and a /status that came in
// meanwhile would wait for all of them. Only the start of a task counts against the budget:
// what it awaits runs when it comes back.

export class TurnQueue {
  private readonly waiting: Array<() => void> = [];
  private running = 0;
  private scheduled = false;
  private idleWaiters: Array<() => void> = [];

  constructor(
    /** Tasks are started one after the other in a turn until this much time has gone by. */
    private readonly budgetMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Runs `task` in a later turn, in order of arrival; settles as its promise does. */
  run<T>(task: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.waiting.push(() => {
        this.running++;
        let p: Promise<T>;
        try {
          p = task();
        } catch (e) {
          p = Promise.reject(e);
        }
        p.then(resolve, reject).finally(() => {
          this.running--;
          this.notifyIdle();
        });
      });
      this.schedule();
    });
  }

  /** Tasks not started yet. */
  get pending(): number {
    return this.waiting.length;
  }

  /** Resolves once no task waits or runs (e.g. before a server closes its connections). */
  idle(): Promise<void> {
    if (this.waiting.length === 0 && this.running === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    // setImmediate: after this turn's I/O callbacks, before the next poll for I/O.
    setImmediate(() => this.turn());
  }

  private turn(): void {
    this.scheduled = false;
    const end = this.now() + this.budgetMs;
    // At least one task per turn, so that a slow one cannot stall the queue.
    do this.waiting.shift()!();
    while (this.waiting.length > 0 && this.now() < end);
    if (this.waiting.length > 0) this.schedule();
    this.notifyIdle();
  }

  private notifyIdle(): void {
    if (this.waiting.length > 0 || this.running > 0) return;
    for (const w of this.idleWaiters.splice(0)) w();
  }
}
