import { spawn } from 'node:child_process';
import { existsSync, fstatSync, mkdirSync, openSync, closeSync, readFileSync, readSync, rmSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * Supervision of the sandbox's processes: each runs detached with its output in a log file and
 * its id in a pid file. A process is stopped only by the id we recorded, and only while its
 * command line is still the one we started (a recycled id is never signalled).
 */
export interface ProcessSpec {
  /** Stable name, `<cluster>-<component>`, used for the pid file. */
  name: string;
  command: string;
  args: string[];
  logFile: string;
  pidFile: string;
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** A string the process's command line must contain for the pid to still be ours. */
  marker: string;
  /**
   * Start it again whenever it exits by itself, as a kubelet does for a container with
   * `restartPolicy: Always` (a provider exits on purpose when it loses leadership, and a
   * Deployment would restart it). Stopping still stops it: signals go to the process group.
   */
  restart?: boolean;
}

/**
 * The restart loop, in bash so that it costs no Node process of its own. It waits for the
 * command, and starts it again one second after it exits, unless a stop was asked for: the
 * TERM/INT that stopProcess sends to the whole process group reaches the command directly, so
 * the trap only notes it (a second SIGTERM would cut the command's own drain short). Other
 * signals sent to the recorded pid (SIGHUP: renew certificates now) are passed on to the command.
 */
const RESTART_LOOP = `
stopping=
trap 'stopping=1' TERM INT
for s in HUP USR1 USR2; do trap "kill -$s \\$child 2>/dev/null" $s; done
while [ -z "$stopping" ]; do
  "$@" & child=$!
  # A trapped signal ends wait early: keep waiting until the command itself has exited.
  while kill -0 "$child" 2>/dev/null; do wait "$child"; done
  [ -n "$stopping" ] && break
  echo "sandbox: $1 exited by itself; starting it again in 1 s" >&2
  sleep 1 & wait $!
done`;

export function readPid(pidFile: string): number | undefined {
  if (!existsSync(pidFile)) return undefined;
  const pid = Number(readFileSync(pidFile, 'utf8').trim());
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

/** Whether `pid` is alive and its command line contains `marker`. */
export function isOurs(pid: number, marker: string): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
    return cmdline.includes(marker);
  } catch {
    return false;
  }
}

export function isRunning(spec: Pick<ProcessSpec, 'pidFile' | 'marker'>): boolean {
  const pid = readPid(spec.pidFile);
  return pid !== undefined && isOurs(pid, spec.marker);
}

/** Starts the process unless it already runs. Returns its pid. */
export function startProcess(spec: ProcessSpec): number {
  const existing = readPid(spec.pidFile);
  if (existing !== undefined && isOurs(existing, spec.marker)) return existing;
  mkdirSync(dirname(spec.logFile), { recursive: true });
  mkdirSync(dirname(spec.pidFile), { recursive: true });
  const fd = openSync(spec.logFile, 'a');
  try {
    const [command, args] = spec.restart ? ['bash', ['-c', RESTART_LOOP, 'sandbox-restart-loop', spec.command, ...spec.args]] : [spec.command, spec.args];
    const child = spawn(command, args, {
      cwd: spec.cwd,
      env: spec.env ?? process.env,
      detached: true,
      stdio: ['ignore', fd, fd],
    });
    if (child.pid === undefined) throw new Error(`could not start ${spec.name}`);
    child.unref();
    writeFileSync(spec.pidFile, String(child.pid));
    return child.pid;
  } finally {
    closeSync(fd);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Stops the process we recorded: SIGTERM (or `signal`), then SIGKILL after `graceMs`.
 * Removes the pid file. A process that is not ours is left alone.
 */
export async function stopProcess(spec: Pick<ProcessSpec, 'pidFile' | 'marker'>, signal: NodeJS.Signals = 'SIGTERM', graceMs = 10_000): Promise<boolean> {
  const pid = readPid(spec.pidFile);
  if (pid === undefined || !isOurs(pid, spec.marker)) {
    rmSync(spec.pidFile, { force: true });
    return false;
  }
  // The whole process group (each process was started detached, so it leads its own): a
  // restart loop and the command it runs are stopped together.
  signalGroup(pid, signal);
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline && isOurs(pid, spec.marker)) await sleep(100);
  if (isOurs(pid, spec.marker)) {
    signalGroup(pid, 'SIGKILL');
    while (isOurs(pid, spec.marker)) await sleep(50);
  }
  rmSync(spec.pidFile, { force: true });
  return true;
}

/**
 * Sends `signal` to the process group we recorded (e.g. SIGSTOP then SIGCONT: a frozen process
 * still has its connections accepted by the kernel and never answers). False, and nothing sent,
 * when the process is not ours.
 */
export function signalProcess(spec: Pick<ProcessSpec, 'pidFile' | 'marker'>, signal: NodeJS.Signals): boolean {
  const pid = readPid(spec.pidFile);
  if (pid === undefined || !isOurs(pid, spec.marker)) return false;
  signalGroup(pid, signal);
  return true;
}

/** Signals the process group led by `pid`, or `pid` alone if it leads none. */
function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
    return;
  } catch {
    /* not a group leader, or gone */
  }
  try {
    process.kill(pid, signal);
  } catch {
    /* already gone */
  }
}

/**
 * The last `lines` lines of a process's log (at most its last `maxBytes`), for an error that
 * says why a component never became ready; empty when there is no log.
 */
export function logTail(logFile: string, lines = 20, maxBytes = 8192): string {
  let fd: number | undefined;
  try {
    fd = openSync(logFile, 'r');
    const size = fstatSync(fd).size;
    const length = Math.min(size, maxBytes);
    const buf = Buffer.alloc(length);
    readSync(fd, buf, 0, length, size - length);
    const text = buf.toString('utf8').replace(/\n$/, '');
    return text.split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
