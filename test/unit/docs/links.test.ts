import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { expect } from 'chai';
import { packageRoot } from '../../../provider/tools/package-root.js';

const root = packageRoot();
const pages = [
  'README.md',
  'SECURITY.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** GitHub's anchor of a heading: lowercased, punctuation dropped, spaces as dashes. */
const anchorOf = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\w\- ]/g, '')
    .replace(/ /g, '-');

function anchors(page: string): Set<string> {
  const out = new Set<string>();
  let code = false;
  for (const line of readFileSync(join(root, page), 'utf8').split('\n')) {
    if (line.startsWith('```')) code = !code;
    const m = !code && /^#{1,6} (.*)$/.exec(line);
    if (m) out.add(anchorOf(m[1]!));
  }
  return out;
}

/** The relative links of a page outside code blocks and spans: [text](target). */
function links(page: string): string[] {
  const text = readFileSync(join(root, page), 'utf8')
    .replace(/```[\s\S]*?```/g, '')
    .replace(/`[^`\n]*`/g, '');
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!).filter((l) => !/^[a-z]+:/.test(l));
}

describe('the docs', () => {
  it('link only to files and headings that exist', () => {
    const broken: string[] = [];
    let checked = 0;
    for (const page of pages) {
      for (const link of links(page)) {
        checked++;
        const [file, anchor] = link.split('#', 2);
        const target = file ? relative(root, resolve(dirname(join(root, page)), file)) : page;
        if (!existsSync(join(root, target))) broken.push(`${page}: ${link} (no file ${target})`);
        else if (anchor !== undefined && target.endsWith('.md') && !anchors(target).has(anchor)) broken.push(`${page}: ${link} (no heading #${anchor} in ${target})`);
      }
    }
    expect(broken).to.deep.equal([]);
    expect(checked, 'links checked').to.be.above(30);
  });

  it('are all reachable from the README', () => {
    const reached = new Set(['README.md']);
    const queue = ['README.md'];
    while (queue.length) {
      const page = queue.shift()!;
      for (const link of links(page)) {
        const file = link.split('#')[0]!;
        if (!file.endsWith('.md')) continue;
        const target = relative(root, resolve(dirname(join(root, page)), file));
        if (pages.includes(target) && !reached.has(target)) {
          reached.add(target);
          queue.push(target);
        }
      }
    }
    expect(pages.filter((p) => !reached.has(p))).to.deep.equal([]);
  });

  it('keep the README an entry page of at most 300 lines', () => {
    expect(readFileSync(join(root, 'README.md'), 'utf8').split('\n').length).to.be.at.most(300);
  });
});
