import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, existsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isRunning, logTail, startProcess, stopProcess, type ProcessSpec } from '../../../test/sandbox/processes.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Pids of live processes whose command line contains `marker`. */
function pidsWith(marker: string): number[] {
  try {
    return execFileSync('pgrep', ['-f', marker], { encoding: 'utf8' }).trim().split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

describe('sandbox processes with restart', function () {
  this.timeout(20_000);
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sandbox-processes-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  function spec(script: string, marker: string): ProcessSpec {
    return { name: 'test', command: 'bash', args: ['-c', script, marker], logFile: join(dir, 'log'), pidFile: join(dir, 'pid'), marker, restart: true };
  }

  it('starts a command again after it exits by itself, and a stop ends the loop for good', async () => {
    const marker = `restart-test-${process.pid}-a`;
    const runs = join(dir, 'runs');
    const s = spec(`echo run >> ${runs}; sleep 0.2; exit 1`, marker);
    startProcess(s);
    for (let i = 0; i < 60 && (!existsSync(runs) || readFileSync(runs, 'utf8').split('\n').length < 3); i++) await sleep(100);
    expect(readFileSync(runs, 'utf8').trim().split('\n').length, 'runs').to.be.at.least(2);
    expect(readFileSync(s.logFile, 'utf8')).to.contain('exited by itself; starting it again in 1 s');
    expect(await stopProcess(s)).to.equal(true);
    const after = readFileSync(runs, 'utf8');
    await sleep(1500);
    expect(readFileSync(runs, 'utf8'), 'no run after the stop').to.equal(after);
    expect(isRunning(s)).to.equal(false);
    expect(pidsWith(marker)).to.deep.equal([]);
  });

  it('stops the command with the loop when the stop is a SIGKILL (no orphan left running)', async () => {
    const marker = `restart-test-${process.pid}-b`;
    const s = spec('sleep 300; true', marker);
    startProcess(s);
    for (let i = 0; i < 50 && pidsWith(marker).length < 2; i++) await sleep(100);
    expect(pidsWith(marker).length, 'the loop and its command').to.equal(2);
    await stopProcess(s, 'SIGKILL');
    for (let i = 0; i < 20 && pidsWith(marker).length > 0; i++) await sleep(100);
    expect(pidsWith(marker)).to.deep.equal([]);
  });

  it('passes a SIGTERM once to the command, which may take its time to drain', async () => {
    const marker = `restart-test-${process.pid}-c`;
    const terms = join(dir, 'terms');
    const s = spec(`trap 'echo term >> ${terms}; sleep 0.5; exit 0' TERM; while :; do sleep 0.1; done`, marker);
    startProcess(s);
    for (let i = 0; i < 50 && pidsWith(marker).length < 2; i++) await sleep(100);
    expect(await stopProcess(s)).to.equal(true);
    expect(readFileSync(terms, 'utf8').trim().split('\n')).to.deep.equal(['term']);
    expect(pidsWith(marker)).to.deep.equal([]);
  });

  it('passes a SIGHUP sent to the recorded pid on to the command, and keeps running', async () => {
    const marker = `restart-test-${process.pid}-d`;
    const hups = join(dir, 'hups');
    const s = spec(`trap 'echo hup >> ${hups}' HUP; while :; do sleep 0.1; done`, marker);
    const pid = startProcess(s);
    for (let i = 0; i < 50 && pidsWith(marker).length < 2; i++) await sleep(100);
    process.kill(pid, 'SIGHUP');
    for (let i = 0; i < 30 && !existsSync(hups); i++) await sleep(100);
    expect(readFileSync(hups, 'utf8').trim()).to.equal('hup');
    expect(isRunning(s), 'the loop is still there').to.equal(true);
    expect(await stopProcess(s)).to.equal(true);
    expect(pidsWith(marker)).to.deep.equal([]);
  });
});

describe('sandbox process logs', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sandbox-log-tail-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('gives the last lines of a log, within a byte bound, and nothing for a missing log', () => {
    const log = join(dir, 'c2-kube-apiserver.log');
    writeFileSync(log, Array.from({ length: 100 }, (_, i) => `line ${i}`).join('\n') + '\n');
    expect(logTail(log, 3)).to.equal('line 97\nline 98\nline 99');
    // The byte bound wins over the line count: what the last 20 bytes hold, the first line cut.
    expect(logTail(log, 50, 20)).to.equal(' 97\nline 98\nline 99');
    expect(logTail(join(dir, 'missing.log'))).to.equal('');
  });
});
