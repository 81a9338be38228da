/** The text up to its first newline (all of it when it has none), as `text.split('\n')[0]`. Pure. */
export function firstLine(text: string): string {
  const end = text.indexOf('\n');
  return end === -1 ? text : text.slice(0, end);
}
