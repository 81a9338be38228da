#!/usr/bin/env node
// The `admiralty` command. It runs the compiled CLI from dist/ with plain node: what ships is
// JavaScript, and tsx stays a development tool. It loads the bundle that `npm run build` makes
// (dist/bundle/: one file per command instead of about a thousand modules, which halves what
// the provider costs to load). This file is not compiled, so it stays JavaScript that any
// supported node runs as is.
import { existsSync } from 'node:fs';

const cli = new URL('../dist/bundle/cli.js', import.meta.url);

if (!existsSync(cli)) {
  process.stderr.write('admiralty: dist/ is missing: run `npm run build` first (from a clone of the repository)\n');
  process.exit(1);
}

const { runAndExit } = await import(cli.href);
await runAndExit(process.argv.slice(2));
