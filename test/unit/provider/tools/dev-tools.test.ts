import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { devToolsPath, loadDevTools } from '../../../../provider/tools/dev-tools.js';
import { packageRoot } from '../../../../provider/tools/package-root.js';

describe('loadDevTools', () => {
  it('finds the sources under test/sandbox when run from them, the compiled tree under dist/test/sandbox otherwise', () => {
    expect(devToolsPath('/clone', true)).to.equal(join('/clone', 'test', 'sandbox', 'dev-tools.ts'));
    expect(devToolsPath('/clone', false)).to.equal(join('/clone', 'dist', 'test', 'sandbox', 'dev-tools.js'));
  });

  it("loads this clone's sandbox command and a sandbox of SANDBOX_DIR at run time", async function () {
    // The sandbox's modules are compiled by tsx on first load: slow on a busy machine.
    this.timeout(120_000);
    const tools = await loadDevTools(packageRoot());
    expect(tools.sandboxCli).to.be.a('function');
    const before = process.env.SANDBOX_DIR;
    const dir = mkdtempSync(join(tmpdir(), 'dev-tools-'));
    process.env.SANDBOX_DIR = dir;
    try {
      const sandbox = tools.createSandbox();
      expect(sandbox.isUp()).to.equal(false);
      expect(sandbox.kubeconfigPath.startsWith(dir)).to.equal(true);
    } finally {
      if (before === undefined) delete process.env.SANDBOX_DIR;
      else process.env.SANDBOX_DIR = before;
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('says the sandbox is not built, naming the file, when the compiled tools are missing', async () => {
    const root = mkdtempSync(join(tmpdir(), 'dev-tools-'));
    try {
      const path = devToolsPath(root, false);
      let err: Error | undefined;
      await loadDevTools(root, path).catch((e: Error) => (err = e));
      expect(err?.message).to.equal(`the sandbox is not built (${path} is missing): run npm run build first`);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
