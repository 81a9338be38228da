/** What {@link firstSignal} needs of a process: `process` is one. */
export interface SignalSource {
  on(signal: NodeJS.Signals, listener: () => void): unknown;
}

/**
 * Resolves with the first of `signals` that `source` receives. Its listeners stay: from then on
 * each of those signals is only passed to `ignored` (a log line), so that a second SIGTERM or a
 * SIGINT during the graceful shutdown does not kill the process at once (Node's default for a
 * signal with no listener). The process exits when the shutdown ends.
 */
export function firstSignal(source: SignalSource, signals: readonly NodeJS.Signals[], ignored: (signal: NodeJS.Signals) => void): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let first: NodeJS.Signals | undefined;
    for (const signal of signals) {
      source.on(signal, () => {
        if (first === undefined) resolve((first = signal));
        else ignored(signal);
      });
    }
  });
}
