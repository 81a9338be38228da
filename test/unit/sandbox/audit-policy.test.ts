import { expect } from 'chai';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sandbox, type SandboxState } from '../../sandbox/sandbox.js';

describe('Sandbox auditPolicyFile', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sandbox-audit-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const state: SandboxState = { basePort: 30000, clusters: ['c1', 'c2', 'c3'], binDir: dir, kwokModuleDir: dir, provider: true };

  it('leaves a file that says the same alone, and replaces another whole, never leaving a partial one', () => {
    const sandbox = new Sandbox(dir);
    const file = sandbox.auditPolicyFile(state);
    const text = readFileSync(file, 'utf8');
    expect(text).to.match(/^apiVersion: audit\.k8s\.io\/v1\nkind: Policy\n/);
    const written = statSync(file);
    // Every cluster asks for it as it starts: the same content is not written again (an
    // apiserver starting meanwhile reads it), so the file is the very same one.
    sandbox.auditPolicyFile(state);
    expect(statSync(file).ino).to.equal(written.ino);
    // Another content (say, a file cut short) is replaced by a rename: a new file, complete.
    writeFileSync(file, 'apiVersion: audit');
    sandbox.auditPolicyFile(state);
    expect(readFileSync(file, 'utf8')).to.equal(text);
    expect(statSync(file).ino).to.not.equal(written.ino);
    expect(readdirSync(dir).filter((f) => f.includes('partial'))).to.deep.equal([]);
  });
});
