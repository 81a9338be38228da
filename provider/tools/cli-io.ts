/**
 * What a command of the `admiralty` CLI gets besides its arguments: where to write, and the
 * environment (read once by the caller, so that commands stay testable in-process).
 */
export interface CliIo {
  /** Machine-readable output (manifests, listings). */
  stdout: TextSink;
  /** Progress, warnings and errors, for people. */
  stderr: TextSink;
  /** Environment variables (`KUBECONFIG`, `HOME`); default: none. */
  env?: Readonly<Record<string, string | undefined>>;
}

/** Anything with a `write(text)`, such as `process.stdout` or a test buffer. */
export interface TextSink {
  write(text: string): unknown;
}

/** Writes one line (a newline is added). */
export function writeLine(sink: TextSink, line = ''): void {
  sink.write(`${line}\n`);
}
