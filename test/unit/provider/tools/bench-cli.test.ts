import { expect } from 'chai';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BENCHMARKS, benchCli, DEFAULT_BENCHMARK, type BenchRunner } from '../../../../provider/tools/bench-cli.js';
import { packageRoot } from '../../../../provider/tools/package-root.js';

function io() {
  const sink = { out: '', err: '' };
  return { sink, io: { stdout: { write: (t: string) => (sink.out += t) }, stderr: { write: (t: string) => (sink.err += t) } } };
}

describe('admiralty bench', () => {
  const root = packageRoot();

  it('knows exactly the benchmark scripts under test/bench/', () => {
    // The other files there are the benchmarks' helpers, not benchmarks.
    const helpers = ['bench-support.ts', 'gangs-report.ts', 'goals.ts', 'offload-report.ts', 'sandbox-run.ts', 'scale-report.ts'];
    const scripts = readdirSync(join(root, 'test', 'bench'))
      .filter((f) => f.endsWith('.ts') && !helpers.includes(f))
      .map((f) => f.slice(0, -3));
    expect(BENCHMARKS.map((b) => b.name)).to.have.members(scripts);
  });

  it('lists the benchmarks on --help, and says what runs with no name', async () => {
    for (const args of [['--help'], ['-h']]) {
      const { sink, io: cliIo } = io();
      let ran = false;
      expect(await benchCli(args, cliIo, async () => ((ran = true), 99), root)).to.equal(0);
      expect(ran).to.equal(false);
      for (const b of BENCHMARKS) expect(sink.out).to.contain(b.name);
      expect(sink.out).to.contain('With no benchmark name, runs `offload`');
    }
  });

  it('runs the offload benchmark with no argument, and with options alone', async () => {
    expect(DEFAULT_BENCHMARK).to.equal('offload');
    const script = join(root, 'test', 'bench', 'offload.ts');
    for (const [args, passed] of [
      [[], []],
      [
        ['--sizes', '100,1000,5000'],
        ['--sizes', '100,1000,5000'],
      ],
      [
        ['--sizes=10', '--out', 'x'],
        ['--sizes=10', '--out', 'x'],
      ],
    ] as [string[], string[]][]) {
      const calls: Parameters<BenchRunner>[] = [];
      const { io: cliIo } = io();
      expect(await benchCli(args, cliIo, async (...call) => (calls.push(call), 0), root)).to.equal(0);
      expect(calls).to.deep.equal([[process.execPath, ['--import', 'tsx', script, ...passed], root]]);
    }
  });

  it("prints one benchmark's usage without running it", async () => {
    const { sink, io: cliIo } = io();
    let ran = false;
    expect(await benchCli(['offload', '--help'], cliIo, async () => ((ran = true), 0), root)).to.equal(0);
    expect(ran).to.equal(false);
    expect(sink.out).to.contain('usage: admiralty bench offload [--sizes 100,1000]');
  });

  it('runs the script through tsx from the repository root with the remaining arguments, and returns its exit code', async () => {
    const calls: Parameters<BenchRunner>[] = [];
    const { io: cliIo } = io();
    const code = await benchCli(['log-throughput', '5', '1'], cliIo, async (...call) => (calls.push(call), 7), root);
    expect(code).to.equal(7);
    expect(calls).to.deep.equal([[process.execPath, ['--import', 'tsx', join(root, 'test', 'bench', 'log-throughput.ts'), '5', '1'], root]]);
  });

  it('refuses an unknown benchmark with exit 2', async () => {
    const { sink, io: cliIo } = io();
    expect(await benchCli(['nope'], cliIo, async () => 0, root)).to.equal(2);
    expect(sink.err).to.contain('unknown benchmark "nope"');
  });

  it('says it needs a clone when run from the published package', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'bench-cli-'));
    try {
      const { sink, io: cliIo } = io();
      expect(await benchCli(['offload'], cliIo, async () => 0, dir)).to.equal(1);
      expect(sink.err).to.contain('needs a clone');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
