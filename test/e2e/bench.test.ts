import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { benchCli, type BenchRunner } from '../../provider/tools/bench-cli.js';
import { SUMMARY_LINE_PATTERN } from '../bench/offload-report.js';
import { REPO_ROOT, Sandbox } from '../sandbox/sandbox.js';
import { checkXmlWellFormed } from '../support/xml-well-formed.js';
import { kubectl, sandbox, waitFor } from './support.js';

/** Runs the benchmark process as `admiralty bench` would, capturing what it prints; `env` adds to the environment. */
function capturing(sink: { out: string; err: string }, env: Record<string, string> = {}): BenchRunner {
  return (command, args, cwd) =>
    new Promise((res, rej) => {
      const child = spawn(command, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
      child.stdout.on('data', (d) => (sink.out += d));
      child.stderr.on('data', (d) => (sink.err += d));
      child.on('error', rej);
      child.on('exit', (code, signal) => res(code ?? (signal ? 128 : 1)));
    });
}

describe('bench', () => {
  const written: string[] = [];
  after(() => {
    for (const f of written) rmSync(f, { force: true });
  });

  it('runs the offload benchmark on the running sandbox, prints the summary line, writes the JSON and the SVG, and leaves the sandbox up', async function () {
    this.timeout(180_000);
    const sink = { out: '', err: '' };
    const io = { stdout: { write: (t: string) => (sink.out += t) }, stderr: { write: (t: string) => (sink.err += t) } };
    const code = await benchCli(['--sizes', '10'], io, capturing(sink));
    expect(code, sink.out + sink.err).to.equal(0);

    // Exactly one summary line for the one size, in the form scripts read.
    const summaries = sink.out.split('\n').filter((l) => l.startsWith('offload '));
    expect(summaries, sink.out).to.have.length(1);
    expect(summaries[0]).to.match(SUMMARY_LINE_PATTERN);
    expect(SUMMARY_LINE_PATTERN.exec(summaries[0]!)![1]).to.equal('10');

    const m = /^bench: wrote (\S+\.json) and (\S+\.svg)$/m.exec(sink.out);
    expect(m, sink.out).to.not.equal(null);
    // Printed relative to the benchmark's working directory, the repository root.
    const [json, svg] = [resolve(REPO_ROOT, m![1]!), resolve(REPO_ROOT, m![2]!)];
    written.push(json, svg);
    expect(json).to.match(/[/\\]\.bench[/\\]offload-[^/\\]+\.json$/);
    const figures = JSON.parse(readFileSync(json, 'utf8'));
    expect(figures.results).to.have.length(1);
    const [result] = figures.results;
    expect(result.size).to.equal(10);
    for (const run of [result.direct, result.offloaded]) {
      expect(run.allRunningSeconds).to.be.a('number').above(0);
      expect(run.deletionSeconds).to.be.a('number').above(0);
      expect(run.startLatencyP99Ms).to.be.at.least(run.startLatencyP50Ms);
      expect(run.providerPeakRssMiB).to.be.above(0);
      // The machine: the target's apiserver worked in both runs, and the cores were busy some of the time.
      expect(run.startMachine.cpuSecondsByProcess['c2-kube-apiserver']).to.be.above(0);
      expect(run.startMachine.busy).to.be.above(0).and.at.most(1);
    }
    expect(result.offloaded.startMachine.cpuSecondsByProcess['c1-provider'], 'the source provider worked to offload').to.be.above(0);
    // The apiservers' requests: the pods were created where each run creates them, the proxies'
    // delegates in c2, and the table says it per pod.
    expect(result.direct.startRequests.c2['POST pods']).to.be.at.least(10);
    expect(result.offloaded.startRequests.c1['POST pods']).to.be.at.least(10);
    expect(result.offloaded.startRequests.c2['POST pods']).to.be.at.least(10);
    expect(result.offloaded.deletionRequests.c2['DELETE pods']).to.be.at.least(10);
    expect(sink.out).to.match(/^10 offloaded, start, c1: [\d.]+ requests a pod, [\d.]+ writes \(.*POST pods [\d.]+/m);
    // And the watch events each apiserver sent for them: every proxy's change went to c1's pod watchers.
    expect(result.offloaded.startWatchEvents.c1.pods).to.be.at.least(10);
    expect(result.offloaded.startWatchBytes.c1.pods).to.be.above(result.offloaded.startWatchEvents.c1.pods);
    expect(sink.out).to.match(/^10 offloaded, start, c1: .*; watch events sent a pod: pods [\d.]+ \([\d.]+ KiB\)/m);
    expect(sink.out).to.match(/^10 offloaded, start: cores \d+ % busy \(of \d+\); sandbox CPU [\d.]+ s \(/m);
    expect(sink.out).to.match(
      /^10 offloaded, CPU floor: [\d.]+ CPU s outside the providers \(theirs [\d.]+ s\) on \d+ cores take at least [\d.]+ s, ratio [\d.]+ with providers that cost nothing; measured [\d.]+$/m,
    );
    expect(sink.out).to.match(/^10 offloaded, provider CPU against the direct run: [\d.]+ s while starting, [\d.]+ per CPU second the sandbox spent starting the pods directly \([\d.]+ s\)$/m);
    expect(sink.out).to.match(/^10 offloaded, provider CPU against the rest of the run: \d\.\d{3} per CPU second the other processes spent while the pods started \([\d.]+ s\)$/m);
    expect(sink.out).to.match(/^10 offloaded, provider memory at its highest sampled RSS: \d+ MiB = V8 heap \d+ \(\d+ used; .*\bnew \d+.*\) \+ external \d+ \+ the rest -?\d+$/m);
    expect(result.offloaded.providerMemoryAtPeak.rssMiB).to.be.above(result.offloaded.providerMemoryAtPeak.heapUsedMiB);
    expect(result.offloaded.stages.map((s: { pods: number }) => s.pods)).to.deep.equal([10, 10, 10, 10, 10, 10]);
    expect(result.offloadedPods).to.have.length(10);
    expect(sink.out).to.match(
      /^10 pods, a second after the first second: direct created [\d.-]+, bound [\d.-]+; offloaded: proxies created [\d.-]+, delegates created [\d.-]+, delegates bound [\d.-]+, proxies bound [\d.-]+, proxies Running [\d.-]+$/m,
    );
    // The goals: at 10 pods, only the p99 one applies; printed and in the JSON, met or not.
    expect(sink.out).to.match(/^10 pods, start p99, offloaded over direct: \d+\.\d\d \([\d.]+ s against [\d.]+ s\), goal at most 1\.5: (met|not met)$/m);
    expect(figures.goals.map((g: { size: number; goal: string }) => `${g.size} ${g.goal}`)).to.deep.equal(['10 start p99, offloaded over direct']);
    expect(figures.goals[0].met).to.be.a('boolean');
    expect(checkXmlWellFormed(readFileSync(svg, 'utf8'))).to.equal('svg');

    // It reused the sandbox, left it up, and took its namespaces away.
    expect(sandbox.isUp()).to.equal(true);
    for (const c of ['c1', 'c2']) expect(await kubectl(c, 'get', 'namespaces', '-o', 'name')).not.to.match(/bench-/);
    expect(existsSync(json)).to.equal(true);
  });

  it('runs the idle-rss benchmark: four ways of starting the provider, their RSS and the ratios, and gives c1 its provider back', async function () {
    this.timeout(240_000);
    const sink = { out: '', err: '' };
    const io = { stdout: { write: (t: string) => (sink.out += t) }, stderr: { write: (t: string) => (sink.err += t) } };
    const code = await benchCli(['idle-rss', '2'], io, capturing(sink));
    expect(code, sink.out + sink.err).to.equal(0);
    const rss = [...sink.out.matchAll(/^(.+): (\d+\.\d) MiB RSS after 2 s idle, peak (\d+\.\d) MiB$/gm)].map((m) => [m[1], Number(m[2]), Number(m[3])] as const);
    expect(rss.map(([label]) => label!.split(' ')[0])).to.deep.equal(['shipped', 'shipped,', 'compiled,', 'through']);
    for (const [, mib, peak] of rss) expect(mib).to.be.above(30).and.at.most(peak);
    console.log(`      RSS after 2 s idle / peak: ${rss.map(([label, mib, peak]) => `${label!.split(' (')[0]} ${mib} / ${peak} MiB`).join(', ')}`);
    expect(sink.out).to.match(/^unbundled \/ shipped: RSS \d+\.\d\d, peak \d+\.\d\d; tsx \/ shipped: RSS \d+\.\d\d, peak \d+\.\d\d$/m);
    const goal = /^the shipped provider's RSS after 2 s idle: (\d+) MB \((\d+\.\d) MiB\), goal at most 120 MB: (met|not met) \(/m.exec(sink.out);
    expect(goal, sink.out).to.not.equal(null);
    expect(Number(goal![2])).to.equal(rss[0]![1]);
    expect(goal![3]).to.equal(Number(goal![1]) <= 120 ? 'met' : 'not met');
    const readyz = `http://127.0.0.1:${sandbox.providerPorts('c1', 0).metrics}/readyz`;
    await waitFor("c1's provider Ready again", 60_000, async () => (await fetch(readyz).catch(() => undefined))?.ok === true);
  });

  it('runs the api-transport benchmark: four ways of calling, their CPU, and the ratios; leaves no namespace behind', async function () {
    this.timeout(120_000);
    const sink = { out: '', err: '' };
    const io = { stdout: { write: (t: string) => (sink.out += t) }, stderr: { write: (t: string) => (sink.err += t) } };
    const code = await benchCli(['api-transport', '40', '10', '1'], io, capturing(sink));
    expect(code, sink.out + sink.err).to.equal(0);
    const ways = [...sink.out.matchAll(/^api-transport: ([a-z0-9-]+): +client CPU ([\d.]+) s \([\d.]+ ms a call\), c2's apiserver CPU ([\d.]+) s, wall ([\d.]+) s$/gm)];
    expect(
      ways.map((m) => m[1]),
      sink.out,
    ).to.deep.equal(['client-node', 'provider', 'https', 'http2']);
    // Each way made its calls: the client and c2's apiserver both worked.
    for (const m of ways)
      expect(
        [Number(m[2]), Number(m[3]), Number(m[4])].every((n) => n > 0),
        m[0],
      ).to.equal(true);
    expect(sink.out).to.match(/^api-transport 40 calls: client CPU against client-node: provider [\d.]+, https [\d.]+, http2 [\d.]+$/m);
    expect(await kubectl('c2', 'get', 'namespaces', '-o', 'name')).not.to.match(/bench-transport-/);
    // Its own bad input: a clear usage line and exit 2.
    const bad = { out: '', err: '' };
    const badIo = { stdout: { write: (t: string) => (bad.out += t) }, stderr: { write: (t: string) => (bad.err += t) } };
    expect(await benchCli(['api-transport', 'many'], badIo, capturing(bad))).to.equal(2);
    expect(bad.err).to.match(/usage: api-transport/);
  });

  describe('the other benchmarks, briefly: each runs and prints its figures', () => {
    /** Runs `admiralty bench <args>`; what it printed, after checking it exited 0. */
    async function bench(...args: string[]): Promise<string> {
      const sink = { out: '', err: '' };
      const io = { stdout: { write: (t: string) => (sink.out += t) }, stderr: { write: (t: string) => (sink.err += t) } };
      const code = await benchCli(args, io, capturing(sink));
      expect(code, sink.out + sink.err).to.equal(0);
      return sink.out;
    }

    it('webhook-latency: every request answered on both routes, and their ratio', async function () {
      this.timeout(60_000);
      const out = await bench('webhook-latency', '40', '4');
      for (const route of ['noop', 'mutate']) expect(out).to.match(new RegExp(`^${route} +n= +40 +p50=[\\d.]+ ms +p99=[\\d.]+ ms$`, 'm'));
      expect(out).to.match(/^ratio mutate\/noop: p50 x[\d.]+ +p99 x[\d.]+$/m);
    });

    it('hostile-admission: every field from 8 items to 6000, allowed up to its limit and denied past it, with its growth exponents', async function () {
      this.timeout(120_000);
      const out = await bench('hostile-admission', '5');
      const fields = [...out.matchAll(/^(\S+) \(limit (\d+)\)$/gm)];
      expect(fields.length, out).to.be.at.least(19);
      for (const [, field, limit] of fields) {
        const block = out.slice(out.indexOf(`${field} (limit ${limit})`)).split('\n\n')[0];
        const rows = [...block!.matchAll(/^ +n= *(\d+) +[\d.]+ KiB +review +[\d.]+ µs .*parse alone +[\d.]+ µs +(allowed|denied)$/gm)].map((m) => [Number(m[1]), m[2]] as const);
        expect(rows[0], field).to.deep.equal([8, 'allowed']);
        expect(rows.at(-1)![0], field).to.be.at.least(6000);
        for (const [n, verdict] of rows) expect(verdict, `${field} at ${n}`).to.equal(n <= Number(limit) ? 'allowed' : 'denied');
        expect(block, field).to.match(/growth exponent: allowed -?[\d.]+, denied -?[\d.]+$/m);
      }
      expect(out).to.match(/^hostile-admission: \d+ fields, largest growth exponent [\d.]+ \(.+\); linear is at most 1, quadratic 2$/m);
    });

    it('extender-latency: filter and prioritize of every proxy shape, every request answered, next to the no-op', async function () {
      this.timeout(120_000);
      const out = await bench('extender-latency', '20', '1');
      expect(out).to.match(/^fleet: 100 targets, \d+ real nodes in their summaries/m);
      const rows = [...out.matchAll(/^(\S+) +(noop|filter|prioritize) +n= +(\d+) +p50= +[\d.]+ ms +p99= +[\d.]+ ms +\d+ req\/s/gm)];
      const shapes = [...new Set(rows.map((m) => m[1]))];
      expect(shapes.length, out).to.be.at.least(3);
      expect(rows.map((m) => `${m[1]} ${m[2]} ${m[3]}`)).to.deep.equal(shapes.flatMap((s) => ['noop', 'filter', 'prioritize'].map((v) => `${s} ${v} 20`)));
      expect(out).not.to.match(/stopped early/);
    });

    it("cache-memory: each cache's heap per pod, less with the provider's transforms and filters than without", async function () {
      this.timeout(120_000);
      const out = await bench('cache-memory', '200');
      const total = /^\| total per offloaded pod \| ([\d.]+) \| ([\d.]+) \|$/m.exec(out);
      expect(total, out).to.not.equal(null);
      expect(Number(total![2])).to.be.above(0).and.below(Number(total![1]));
    });

    it('log-throughput: the same bytes through the proxy and on its delegate, and the ratio', async function () {
      this.timeout(180_000);
      const out = await bench('log-throughput', '1', '1');
      expect(out).to.match(/^bench: kubectl logs on the delegate in c2: [\d.]+ MiB\/s$/m);
      expect(out).to.match(/^bench: kubectl logs on the proxy in c1: +[\d.]+ MiB\/s$/m);
      expect(out).to.match(/^bench: ratio proxy\/direct: [\d.]+; provider CPU [\d.]+ s for [\d.]+ MiB$/m);
    });
  });

  describe('with no sandbox up', () => {
    // A sandbox of its own, beside the suite's: another folder, so other ports. Made in a hook,
    // not when the file loads, so that a run whose filter skips this suite leaves no folder.
    let dir = '';
    before(() => {
      dir = mkdtempSync(join(tmpdir(), 'bench-sandbox-'));
    });
    after(async function () {
      this.timeout(60_000);
      await new Sandbox(dir).down(); // in case the benchmark failed before stopping it
      rmSync(dir, { recursive: true, force: true });
    });

    it('starts the sandbox it needs, gives each cluster cores of its own when asked, and stops it at the end', async function () {
      this.timeout(240_000);
      const sink = { out: '', err: '' };
      const io = { stdout: { write: (t: string) => (sink.out += t) }, stderr: { write: (t: string) => (sink.err += t) } };
      const code = await benchCli(['offload', '--sizes', '2', '--pin-clusters'], io, capturing(sink, { SANDBOX_DIR: dir }));
      expect(code, sink.out + sink.err).to.equal(0);
      expect(sink.out).to.contain('bench: the sandbox is not up: starting it, its providers logging at info as the Deployment does');
      expect(sink.out).to.contain('bench: each cluster on cores of its own');
      expect(sink.out).to.contain('bench: stopping the sandbox it started');
      expect(sink.out).to.match(/^offload 2 pods: direct /m);
      expect(sink.out).to.match(/^2 offloaded, CPU floor: .* in c[12], the busier cluster, on its \d+ of \d+ cores take at least /m);
      const m = /^bench: wrote (\S+\.json) and (\S+\.svg)$/m.exec(sink.out);
      if (m) written.push(resolve(REPO_ROOT, m[1]!), resolve(REPO_ROOT, m[2]!));
      expect(m, sink.out).to.not.equal(null);
      const json = JSON.parse(readFileSync(resolve(REPO_ROOT, m![1]!), 'utf8'));
      expect(json.pinClusters).to.equal(true);
      expect(json.providerLogLevel).to.equal('info');
      expect(new Sandbox(dir).state()).to.equal(undefined);
      expect(sandbox.isUp(), "the suite's sandbox").to.equal(true);
    });
  });
});
