/**
 * A small well-formedness check for the XML we write by hand (the benchmarks' SVG charts): one
 * root element, every tag closed in order, attributes quoted, only the five predefined entities
 * and numeric references. Not a parser of all XML (no DTD, CDATA or comments; we write none).
 *
 * @throws Error naming the first fault.
 * @returns the root element's name.
 */
export function checkXmlWellFormed(text: string): string {
  const body = text.replace(/^<\?xml[^?]*\?>\s*/, '');
  const stack: string[] = [];
  let root: string | undefined;
  const tag = /<(\/?)([A-Za-z_][\w.:-]*)((?:\s+[A-Za-z_][\w.:-]*\s*=\s*(?:"[^"<]*"|'[^'<]*'))*)\s*(\/?)>/y;
  let i = 0;
  while (i < body.length) {
    const lt = body.indexOf('<', i);
    const textPart = lt < 0 ? body.slice(i) : body.slice(i, lt);
    checkText(textPart, stack.length > 0);
    if (lt < 0) break;
    tag.lastIndex = lt;
    const m = tag.exec(body);
    if (!m) throw new Error(`malformed tag at offset ${lt}: ${JSON.stringify(body.slice(lt, lt + 40))}`);
    const [, closing, name = '', attrs = '', selfClosing] = m;
    for (const v of attrs.match(/"[^"]*"|'[^']*'/g) ?? []) checkText(v.slice(1, -1), true);
    if (closing) {
      if (selfClosing || attrs.trim()) throw new Error(`malformed closing tag </${name}>`);
      const open = stack.pop();
      if (open !== name) throw new Error(`</${name}> closes <${open ?? 'nothing'}>`);
    } else {
      if (stack.length === 0) {
        if (root !== undefined) throw new Error(`a second root element <${name}>`);
        root = name;
      }
      if (!selfClosing) stack.push(name);
    }
    i = tag.lastIndex;
  }
  if (root === undefined) throw new Error('no root element');
  if (stack.length) throw new Error(`<${stack[stack.length - 1]}> is never closed`);
  return root;
}

function checkText(text: string, inside: boolean): void {
  if (!inside && text.trim() !== '') throw new Error(`text outside the root element: ${JSON.stringify(text.trim().slice(0, 40))}`);
  for (const m of text.matchAll(/&[^;\s]*;?/g)) {
    if (!/^&(amp|lt|gt|quot|apos|#\d+|#x[0-9a-fA-F]+);$/.test(m[0])) throw new Error(`bad entity ${JSON.stringify(m[0])}`);
  }
}
