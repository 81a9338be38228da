import { expect } from 'chai';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { COMMANDS } from '../../../../provider/cli.js';
import { SHIPPED_NODE_OPTIONS } from '../../../../provider/core/heap-growth.js';
import { packageRoot } from '../../../../provider/tools/package-root.js';

/**
 * No container engine runs here, so the image is never built in tests. This is the cheap
 * consistency check instead: after `npm run build`, every path the Dockerfile copies exists in
 * the repository (for `--from=build`, what the build stage produces from it), and the
 * entrypoint and Deployment start a command the CLI has.
 */
const root = packageRoot();
const dockerfile = readFileSync(join(root, 'manifests', 'image', 'Dockerfile'), 'utf8');
const instructions = dockerfile
  .split('\n')
  .filter((l) => l.trim() && !l.trimStart().startsWith('#'))
  .map((l) => l.trim());
/** Working directory of the build stage, where the repository is copied to. */
const BUILD_WORKDIR = '/src/';

describe('manifests/image/Dockerfile', () => {
  before(() => {
    expect(existsSync(join(root, 'dist', 'provider', 'cli.js')), 'dist/ is missing: run `npm run build` first').to.equal(true);
  });

  it('copies only paths that exist (after a build)', () => {
    const copies = instructions.filter((l) => l.startsWith('COPY '));
    expect(copies.length).to.be.greaterThan(3);
    for (const line of copies) {
      const words = line.split(/\s+/).slice(1);
      const from = words.find((w) => w.startsWith('--from='))?.slice('--from='.length);
      const sources = words.filter((w) => !w.startsWith('--')).slice(0, -1);
      for (const src of sources) {
        if (from === 'prod-deps') continue; // node_modules of `npm ci --omit=dev`, made in the image
        if (from === 'build') {
          expect(src.startsWith(BUILD_WORKDIR), line).to.equal(true);
          expect(existsSync(join(root, src.slice(BUILD_WORKDIR.length))), line).to.equal(true);
        } else {
          expect(from, line).to.equal(undefined);
          expect(existsSync(join(root, src)), line).to.equal(true);
        }
      }
    }
  });

  it('starts bin/admiralty.js with plain node, as a non-root user, on Node 22', () => {
    const entry = instructions.find((l) => l.startsWith('ENTRYPOINT '))!;
    const argv = JSON.parse(entry.slice('ENTRYPOINT '.length)) as string[];
    expect(argv[0]).to.equal('node');
    expect(argv).to.have.length(2); // no --import tsx: compiled JavaScript only
    expect(existsSync(join(root, argv[1]!)), entry).to.equal(true);
    expect(instructions).to.include('COPY bin/ bin/');
    expect(instructions.find((l) => l.startsWith('USER '))).to.match(/^USER [1-9]\d*:[1-9]\d*$/);
    expect(dockerfile).to.match(/^ARG NODE_IMAGE=node:22-bookworm-slim$/m);
  });

  it("sets the provider's node options, as the sandbox starts it", () => {
    const env = instructions.filter((l) => l.startsWith('ENV NODE_OPTIONS='));
    expect(env).to.deep.equal([`ENV NODE_OPTIONS=${SHIPPED_NODE_OPTIONS}`]);
  });

  it('runs the provider command, in the image and in the Deployment', () => {
    const cmd = JSON.parse(instructions.find((l) => l.startsWith('CMD '))!.slice('CMD '.length)) as string[];
    expect(cmd).to.deep.equal(['provider']);
    const deployment = parse(readFileSync(join(root, 'manifests', 'deployment.yaml'), 'utf8')) as {
      spec: { template: { spec: { containers: { name: string; args: string[]; command?: string[] }[] } } };
    };
    const provider = deployment.spec.template.spec.containers.find((c) => c.name === 'provider')!;
    expect(provider.command).to.equal(undefined);
    expect(provider.args[0]).to.equal('provider');
    expect(COMMANDS.map(([name]) => name)).to.include(provider.args[0]);
  });

  it('sends the build every file it copies (the .dockerignore allow-list)', () => {
    const allowed = readFileSync(join(root, 'manifests', 'image', 'Dockerfile.dockerignore'), 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('!'))
      .map((l) => l.slice(1).replace(/\/$/, ''));
    for (const line of instructions.filter((l) => l.startsWith('COPY ') && !l.includes('--from='))) {
      for (const src of line.split(/\s+/).slice(1, -1)) {
        const path = src.replace(/\/$/, '');
        expect(allowed.some((a) => a === path || a.startsWith(`${path}/`)), `${line}: ${path} is not in the allow-list`).to.equal(true);
      }
    }
  });
});
