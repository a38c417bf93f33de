/**
 * A tiny document model for the experiment report, rendered to Markdown and
 * to HTML from the same blocks so the two never disagree.
 *
 * PURE.
 */
export type Block =
  | { kind: 'h1' | 'h2' | 'h3'; text: string }
  | { kind: 'p'; text: string }
  | { kind: 'list'; items: string[] }
  | { kind: 'code'; text: string; lang?: string }
  | { kind: 'table'; head: string[]; rows: string[][]; align?: ('l' | 'r')[] }
  | { kind: 'img'; src: string; alt: string };

const mdCell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

export function toMarkdown(blocks: readonly Block[]): string {
  const out: string[] = [];
  for (const b of blocks) {
    switch (b.kind) {
      case 'h1':
        out.push(`# ${b.text}`);
        break;
      case 'h2':
        out.push(`## ${b.text}`);
        break;
      case 'h3':
        out.push(`### ${b.text}`);
        break;
      case 'p':
        out.push(b.text);
        break;
      case 'list':
        out.push(b.items.map((i) => `- ${i}`).join('\n'));
        break;
      case 'code':
        out.push(`\`\`\`${b.lang ?? ''}\n${b.text}\n\`\`\``);
        break;
      case 'table': {
        const align = b.head.map((_, i) => (b.align?.[i] === 'r' ? '---:' : '---'));
        out.push([`| ${b.head.map(mdCell).join(' | ')} |`, `| ${align.join(' | ')} |`, ...b.rows.map((r) => `| ${r.map(mdCell).join(' | ')} |`)].join('\n'));
        break;
      }
      case 'img':
        out.push(`![${b.alt}](${b.src})`);
        break;
    }
  }
  return `${out.join('\n\n')}\n`;
}

function escapeHtml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** Inline Markdown the report uses: `code` and **bold**, on escaped text. */
function inline(s: string): string {
  return escapeHtml(s)
    .replace(/`([^`]+)`/g, '<code>$1</code>')
    .replace(/\*\*([^*]+)\*\*/g, '<strong>$1</strong>')
    .replace(/\[([^\]]+)\]\(([^)\s]+)\)/g, '<a href="$2">$1</a>');
}

const STYLE = `
body { font-family: Helvetica, Arial, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .8em 0; font-size: .9em; }
th, td { border: 1px solid #ddd; padding: .3em .6em; } th { background: #f6f6f6; text-align: left; }
td.r { text-align: right; font-variant-numeric: tabular-nums; }
code { background: #f3f3f3; padding: 0 .2em; border-radius: 3px; }
pre { background: #f6f6f6; padding: .8em; overflow-x: auto; }
img { max-width: 100%; display: block; margin: .8em 0; }
`;

export function toHtml(title: string, blocks: readonly Block[]): string {
  const out: string[] = [];
  for (const b of blocks) {
    switch (b.kind) {
      case 'h1':
      case 'h2':
      case 'h3':
        out.push(`<${b.kind}>${inline(b.text)}</${b.kind}>`);
        break;
      case 'p':
        out.push(`<p>${inline(b.text)}</p>`);
        break;
      case 'list':
        out.push(`<ul>\n${b.items.map((i) => `  <li>${inline(i)}</li>`).join('\n')}\n</ul>`);
        break;
      case 'code':
        out.push(`<pre><code>${escapeHtml(b.text)}</code></pre>`);
        break;
      case 'table': {
        const cls = (i: number) => (b.align?.[i] === 'r' ? ' class="r"' : '');
        out.push(
          `<table>\n<thead><tr>${b.head.map((h) => `<th>${inline(h)}</th>`).join('')}</tr></thead>\n<tbody>\n${b.rows
            .map((r) => `<tr>${r.map((c, i) => `<td${cls(i)}>${inline(c)}</td>`).join('')}</tr>`)
            .join('\n')}\n</tbody>\n</table>`,
        );
        break;
      }
      case 'img':
        out.push(`<img src="${escapeHtml(b.src)}" alt="${escapeHtml(b.alt)}">`);
        break;
    }
  }
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${escapeHtml(title)}</title>
<style>${STYLE}</style>
</head>
<body>
${out.join('\n')}
</body>
</html>
`;
}
