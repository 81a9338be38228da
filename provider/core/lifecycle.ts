import { errorFields, type Logger } from './logger.js';

/**
 * Collects named stop hooks and runs them in reverse order of registration on SIGTERM/SIGINT,
 * all within one deadline, so in-flight work finishes and leadership is released.
 */
export class Lifecycle {
  private readonly hooks: { name: string; stop: () => Promise<void> | void }[] = [];

  constructor(private readonly o: { logger: Logger; signals?: NodeJS.Signals[]; processLike?: Pick<NodeJS.Process, 'once'> }) {}

  add(name: string, stop: () => Promise<void> | void): void {
    this.hooks.push({ name, stop });
  }

  /** Runs every hook, newest first; a hook that fails or overruns does not stop the others. */
  async stopAll(deadlineMs: number): Promise<void> {
    const deadline = Date.now() + deadlineMs;
    for (const h of [...this.hooks].reverse()) {
      const left = Math.max(0, deadline - Date.now());
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([Promise.resolve(h.stop()), new Promise<void>((res) => (timer = setTimeout(res, left)))]);
      } catch (err) {
        this.o.logger.warn('stop hook failed', { hook: h.name, ...errorFields(err) });
      } finally {
        clearTimeout(timer);
      }
    }
  }

  /** Resolves with exit code 0 after the first signal, once every hook ran. */
  waitForSignal(deadlineMs: number): Promise<number> {
    const proc = this.o.processLike ?? process;
    return new Promise((res) => {
      for (const s of this.o.signals ?? (['SIGTERM', 'SIGINT'] as NodeJS.Signals[])) {
        proc.once(s, () => {
          this.o.logger.info('shutting down', { signal: s });
          void this.stopAll(deadlineMs).then(() => res(0));
        });
      }
    });
  }
}
