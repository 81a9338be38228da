import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import { packageRoot } from '../../provider/tools/package-root.js';
import { buildBinaries } from '../sandbox/sandbox.js';

const run = promisify(execFile);
const root = packageRoot();

/**
 * The package as a user gets it: `npm pack`, installed into an empty folder, run as the
 * `admiralty` command with plain node. Needs the npm registry (or its cache) for dependencies.
 */
describe('the published package', () => {
  let dir: string;
  let files: string[];
  before(async function () {
    this.timeout(300_000);
    dir = mkdtempSync(join(tmpdir(), 'admiralty-pack-'));
    const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', dir], { cwd: root, maxBuffer: 16 << 20 });
    const [packed] = JSON.parse(stdout.slice(stdout.indexOf('['))) as { filename: string; files: { path: string }[] }[];
    files = packed!.files.map((f) => f.path);
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'try-admiralty', private: true }));
    await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', join(dir, packed!.filename)], { cwd: dir });
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('ships the command, the compiled code, the manifests and the chart, and no tests or sandbox', () => {
    expect(files).to.include.members([
      'bin/admiralty.js',
      'bin/kubectl-admiralty.js',
      'dist/bundle/cli.js',
      'dist/provider/cli.js',
      'dist/provider/main.js',
      'manifests/kustomization.yaml',
      'charts/admiralty/Chart.yaml',
      'charts/admiralty/crds/targets.yaml',
      'package.json',
    ]);
    expect(
      files.filter((f) => /^(test|provider|webhook|certs|scheduler)\//.test(f) || f.startsWith('dist/test/') || f.endsWith('.ts') || f.includes('/go/') || f === 'charts/render-manifests.sh'),
    ).to.deep.equal([]);
  });

  it("bundles no copy of tr46's mapping table (node-fetch's whatwg-url is the platform URL)", () => {
    const bundle = join(dir, 'node_modules', 'admiralty-ts', 'dist', 'bundle');
    const chunks = readdirSync(bundle).filter((f) => f.endsWith('.js'));
    expect(chunks).to.not.be.empty;
    // A value found only in tr46's table (1.4 MiB of heap once loaded).
    expect(chunks.filter((f) => readFileSync(join(bundle, f), 'utf8').includes('disallowed_STD3_valid'))).to.deep.equal([]);
  });

  it('runs `admiralty version` and `--help` from an empty folder', async () => {
    const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
    const bin = join(dir, 'node_modules', '.bin', 'admiralty');
    expect((await run(bin, ['version'], { cwd: dir })).stdout).to.equal(`${version}\n`);
    expect((await run(bin, ['--help'], { cwd: dir })).stdout).to.contain('export-kubeconfig');
  });

  it('runs as `kubectl admiralty` (kubectl finds the installed kubectl-admiralty on the PATH), status and explain included', async function () {
    this.timeout(600_000);
    const kubectl = join(buildBinaries('control-plane'), 'kubectl');
    const env = { PATH: `${join(dir, 'node_modules', '.bin')}${delimiter}${process.env.PATH}`, HOME: dir };
    const help = (await run(kubectl, ['admiralty', '--help'], { cwd: dir, env })).stdout;
    expect(help)
      .to.contain('usage: kubectl admiralty <command>')
      .and.match(/^ {2}status /m)
      .and.match(/^ {2}explain /m);
    expect((await run(kubectl, ['admiralty', 'status', '--help'], { cwd: dir, env })).stdout).to.contain('usage: kubectl admiralty status');
    expect((await run(kubectl, ['admiralty', 'explain', '--help'], { cwd: dir, env })).stdout).to.contain('usage: kubectl admiralty explain POD');
  });

  it('loads the provider and export-kubeconfig with production dependencies only', async () => {
    const bin = join(dir, 'node_modules', '.bin', 'admiralty');
    expect((await run(bin, ['provider', '--help'], { cwd: dir })).stdout).to.contain('--cluster-name');
    // Without --cluster-name the provider stops at its configuration check, after every module
    // of main.js (and each dependency they import) has loaded.
    const env = { PATH: process.env.PATH };
    const err = await run(bin, ['provider'], { cwd: dir, env }).then(
      () => undefined,
      (e: { code: number; stderr: string }) => e,
    );
    expect(err?.code).to.equal(2);
    expect(err?.stderr).to.contain('config: ').and.not.contain('ERR_MODULE_NOT_FOUND');
    expect((await run(bin, ['export-kubeconfig', '--help'], { cwd: dir })).stdout).to.contain('usage: admiralty export-kubeconfig');
  });

  it('says that sandbox, demo and bench need a clone', async () => {
    const bin = join(dir, 'node_modules', '.bin', 'admiralty');
    for (const cmd of ['sandbox', 'demo', 'bench']) {
      const err = await run(bin, [cmd, cmd === 'bench' ? 'offload' : 'up'], { cwd: dir }).then(
        () => undefined,
        (e: { code: number; stderr: string }) => e,
      );
      expect(err?.code, cmd).to.equal(1);
      expect(err?.stderr, cmd).to.contain('needs a clone');
    }
  });
});
