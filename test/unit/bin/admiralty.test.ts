import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packageRoot } from '../../../provider/tools/package-root.js';

const root = packageRoot();
const bin = join(root, 'bin', 'admiralty.js');

/** Runs `node <script> …args` with plain node (no tsx), as an installed command runs. */
function node(script: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [script, ...args], { cwd: tmpdir(), env: { PATH: process.env.PATH } }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

describe('bin/admiralty.js (compiled, plain node)', () => {
  before(() => {
    // The command runs dist/; `npm run test:unit` builds first.
    expect(existsSync(join(root, 'dist', 'provider', 'cli.js')), 'dist/ is missing: run `npm run build` first').to.equal(true);
  });

  it('prints the package version', async () => {
    const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
    const r = await node(bin, 'version');
    expect(r).to.include({ code: 0, stdout: `${version}\n` });
  });

  it('prints the usage on --help and exits 2 with it on an unknown command', async () => {
    const help = await node(bin, '--help');
    expect(help.code).to.equal(0);
    expect(help.stdout).to.contain('usage: admiralty <command>');
    const bad = await node(bin, 'nope');
    expect(bad.code).to.equal(2);
    expect(bad.stderr).to.contain('usage: admiralty <command>');
  });

  it('is what package.json names as the admiralty command', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { bin: Record<string, string> };
    expect(join(root, pkg.bin.admiralty!)).to.equal(bin);
  });

  it('runs as bin/kubectl-admiralty.js, the kubectl plugin package.json names, with usage texts that say kubectl admiralty', async () => {
    const plugin = join(root, 'bin', 'kubectl-admiralty.js');
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { bin: Record<string, string> };
    expect(join(root, pkg.bin['kubectl-admiralty']!)).to.equal(plugin);
    const help = await node(plugin, '--help');
    expect(help).to.include({ code: 0 });
    expect(help.stdout).to.contain('usage: kubectl admiralty <command>');
    const bad = await node(plugin, 'nope');
    expect(bad.code).to.equal(2);
    expect(bad.stderr).to.contain('kubectl admiralty: unknown command "nope"');
  });

  it('says to build first when dist/ is missing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'admiralty-bin-'));
    try {
      mkdirSync(join(dir, 'bin'));
      copyFileSync(bin, join(dir, 'bin', 'admiralty.js'));
      copyFileSync(join(root, 'package.json'), join(dir, 'package.json'));
      const r = await node(join(dir, 'bin', 'admiralty.js'), 'version');
      expect(r.code).to.equal(1);
      expect(r.stderr).to.contain('run `npm run build` first');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
