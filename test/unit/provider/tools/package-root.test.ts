import { expect } from 'chai';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { isClone, packageRoot, packageVersion } from '../../../../provider/tools/package-root.js';

describe('packageRoot', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'package-root-'));
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'x', version: '9.8.7' }));
    mkdirSync(join(dir, 'dist', 'test', 'sandbox'), { recursive: true });
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('finds the same root from the sources and from dist/, at different depths', () => {
    expect(packageRoot(pathToFileURL(join(dir, 'dist', 'test', 'sandbox', 'sandbox.js')))).to.equal(dir);
    expect(packageRoot(join(dir, 'dist', 'cli.js'))).to.equal(dir);
    expect(packageVersion(dir)).to.equal('9.8.7');
  });

  it('tells a clone (the sandbox sources are there) from the published package', () => {
    expect(isClone(dir)).to.equal(false);
    mkdirSync(join(dir, 'test', 'sandbox'), { recursive: true });
    writeFileSync(join(dir, 'test', 'sandbox', 'build.sh'), '');
    expect(isClone(dir)).to.equal(true);
  });
});
