// Markdown to DOM nodes, for the chat page.
//
// The model's text is never parsed as HTML: every piece of it reaches the
// page as a text node, and the only elements are the ones made here with
// document.createElement. Markup in an answer (<script>, <img onerror=...>)
// therefore shows as the characters it is made of. Links keep only http,
// https and mailto addresses.
//
// What it reads is the Markdown models write: fenced code blocks (a fence
// still open, as mid-stream, runs to the end of the text), ATX headings,
// lists (nested by indentation), block quotes, tables, rules, and inline
// code, strong, emphasis, strikethrough, links and bare URLs. A line break
// inside a paragraph is kept as one.

const FENCE = /^( {0,3})(`{3,}|~{3,})(.*)$/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}>[ ]?(.*)$/;
const ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:[ \t]+(.*)|[ \t]*)$/;
const TABLE_RULE = /^ *\|? *:?-+:? *(\| *:?-+:? *)*\|? *$/;
const URL_START = /^(?:https?:\/\/|mailto:)/i;
// Sticky: tried at one position of the text, never by slicing the rest off.
const AUTOLINK_START = /(?:https?:\/\/|mailto:)/iy;
const BARE_URL_START = /https?:\/\//iy;
const NOT_IN_URL = /[\s<>"'`]/;
const AUTHORITY_END = /[\s<>"'`/?#]/;
// A bare URL's host (and user, port) longer than this is text: every
// "http" inside one would read it again.
const MAX_AUTHORITY = 512;
const PUNCTUATION = /[!-\/:-@\[-`{-~]/;
const SAFE_SCHEMES = new Set(["http:", "https:", "mailto:"]);
// Nesting this deep is not text anyone writes; stop parsing structure there.
const MAX_DEPTH = 16;
// How far a link's [label] and (target) may reach: beyond that it is text.
const MAX_LABEL = 500;
const MAX_TARGET = 2000;

/** The Markdown `text` as a DocumentFragment. */
export function renderMarkdown(text) {
  const fragment = document.createDocumentFragment();
  blocks(fragment, splitLines(text), false, 0);
  return fragment;
}

/** A link target the page may open, as an absolute address, or null. */
export function safeHref(target) {
  let url;
  try {
    url = new URL(target, document.baseURI);
  } catch {
    return null;
  }
  return SAFE_SCHEMES.has(url.protocol) ? url.href : null;
}

function splitLines(text) {
  return text
    .replace(/\r\n?/g, "\n")
    .split("\n")
    .map((line) => line.replace(/^\t+/, (tabs) => "    ".repeat(tabs.length)));
}

function element(tag, text) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  return node;
}

function isBlank(line) {
  return line.trim() === "";
}

function indentOf(line) {
  return line.length - line.trimStart().length;
}

// Whether `line` starts a block other than a paragraph (so it ends one).
function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) ||
    ITEM.test(line);
}

function blocks(parent, lines, tight, depth) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (isBlank(line)) {
      i += 1;
      continue;
    }
    if (depth >= MAX_DEPTH) {
      i = paragraph(parent, lines, i, tight, depth);
      continue;
    }
    let match;
    if ((match = FENCE.exec(line)) && !(match[2][0] === "`" && match[3].includes("`"))) {
      i = fence(parent, lines, i, match);
    } else if ((match = HEADING.exec(line))) {
      const heading = element(`h${match[1].length}`);
      inline(heading, match[2] || "", depth);
      parent.append(heading);
      i += 1;
    } else if (RULE.test(line)) {
      parent.append(element("hr"));
      i += 1;
    } else if (QUOTE.test(line)) {
      i = quote(parent, lines, i, depth);
    } else if (ITEM.test(line)) {
      i = list(parent, lines, i, depth);
    } else if (isTableStart(lines, i)) {
      i = table(parent, lines, i, depth);
    } else {
      i = paragraph(parent, lines, i, tight, depth);
    }
  }
}

function fence(parent, lines, start, match) {
  const indent = match[1].length;
  const marker = match[2];
  const closing = new RegExp(`^ {0,3}${marker[0] === "`" ? "`" : "~"}{${marker.length},}[ \\t]*$`);
  const body = [];
  let i = start + 1;
  while (i < lines.length && !closing.test(lines[i])) {
    const line = lines[i];
    body.push(line.slice(Math.min(indent, indentOf(line))));
    i += 1;
  }
  const pre = element("pre");
  const code = element("code", body.join("\n"));
  const language = match[3].trim().split(/\s+/)[0].replace(/[^\w+#.-]/g, "");
  if (language) {
    code.className = `language-${language}`;
    pre.dataset.language = language;
  }
  pre.append(code);
  parent.append(pre);
  // Past the closing fence; an unclosed one ran to the end.
  return i + 1;
}

function paragraph(parent, lines, start, tight, depth) {
  const text = [lines[start].trim()];
  let i = start + 1;
  while (i < lines.length && !isBlank(lines[i]) && !startsBlock(lines[i]) &&
         !isTableStart(lines, i)) {
    text.push(lines[i].trim());
    i += 1;
  }
  if (tight) {
    inline(parent, text.join("\n"), depth);
  } else {
    const p = element("p");
    inline(p, text.join("\n"), depth);
    parent.append(p);
  }
  return i;
}

function quote(parent, lines, start, depth) {
  const inner = [];
  let i = start;
  let match;
  while (i < lines.length && (match = QUOTE.exec(lines[i]))) {
    inner.push(match[1]);
    i += 1;
  }
  const node = element("blockquote");
  blocks(node, inner, false, depth + 1);
  parent.append(node);
  return i;
}

function list(parent, lines, start, depth) {
  const first = ITEM.exec(lines[start]);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const node = element(ordered ? "ol" : "ul");
  if (ordered) {
    const number = parseInt(first[2], 10);
    if (number !== 1) node.start = number;
  }
  const items = [];
  let loose = false;
  let i = start;
  while (i < lines.length) {
    const match = ITEM.exec(lines[i]);
    if (!match || match[1].length !== indent || /\d/.test(match[2]) !== ordered) break;
    const column = indent + match[2].length + 1;
    const content = [match[3] || ""];
    i += 1;
    let blankBefore = false;
    while (i < lines.length) {
      const line = lines[i];
      if (isBlank(line)) {
        blankBefore = true;
        content.push("");
        i += 1;
        continue;
      }
      const lineIndent = indentOf(line);
      if (lineIndent > indent) {
        if (blankBefore) loose = loose || !ITEM.test(line);
        content.push(line.slice(Math.min(lineIndent, column)));
      } else if (!blankBefore && !startsBlock(line) && !isTableStart(lines, i)) {
        // A lazy continuation of the item's paragraph.
        content.push(line.trim());
      } else {
        break;
      }
      blankBefore = false;
      i += 1;
    }
    // Blank lines at the item's end belong between items, not inside.
    while (content.length > 1 && isBlank(content[content.length - 1])) content.pop();
    items.push(content);
    if (blankBefore && i < lines.length) {
      const next = ITEM.exec(lines[i]);
      if (next && next[1].length === indent && /\d/.test(next[2]) === ordered) loose = true;
    }
  }
  for (const content of items) {
    const li = element("li");
    blocks(li, content, !loose, depth + 1);
    node.append(li);
  }
  parent.append(node);
  return i;
}

function isTableStart(lines, i) {
  return lines[i].includes("|") && i + 1 < lines.length && lines[i + 1].includes("-") &&
    TABLE_RULE.test(lines[i + 1]) && cells(lines[i]).length === cells(lines[i + 1]).length;
}

function cells(line) {
  let text = line.trim();
  if (text.startsWith("|")) text = text.slice(1);
  if (text.endsWith("|") && !text.endsWith("\\|")) text = text.slice(0, -1);
  const out = [];
  let cell = "";
  for (let i = 0; i < text.length; i += 1) {
    if (text[i] === "\\" && text[i + 1] === "|") {
      cell += "|";
      i += 1;
    } else if (text[i] === "|") {
      out.push(cell.trim());
      cell = "";
    } else {
      cell += text[i];
    }
  }
  out.push(cell.trim());
  return out;
}

function table(parent, lines, start, depth) {
  const aligns = cells(lines[start + 1]).map((rule) => {
    const left = rule.startsWith(":");
    const right = rule.endsWith(":");
    return left && right ? "center" : right ? "right" : left ? "left" : "";
  });
  const row = (line, tag) => {
    const tr = element("tr");
    const values = cells(line);
    aligns.forEach((align, k) => {
      const cell = element(tag);
      if (align) cell.className = `align-${align}`;
      inline(cell, values[k] || "", depth);
      tr.append(cell);
    });
    return tr;
  };
  const head = element("thead");
  head.append(row(lines[start], "th"));
  const body = element("tbody");
  let i = start + 2;
  while (i < lines.length && !isBlank(lines[i]) && lines[i].includes("|")) {
    body.append(row(lines[i], "td"));
    i += 1;
  }
  const wrap = element("div");
  wrap.className = "table-wrap";
  const node = element("table");
  node.append(head, body);
  wrap.append(node);
  parent.append(wrap);
  return i;
}

// ---- inline ----

// Every search below starts at the current position and either consumes
// what it scanned or remembers its answer (misses, pairs), so the work is
// linear in the text: a run of 2 MB of `<`, `[` or `http://[/` renders in
// one pass (tests/server/page/test_markdown_work.py counts it).
function inline(parent, text, depth) {
  // Where a search for each closing delimiter already failed: a later
  // search for it fails too, so text full of unmatched * or ` stays linear.
  const misses = new Map();
  let pairs = null;
  // Before this position a bare URL was tried and was not one: an "http"
  // inside it is not tried again.
  let notUrlBefore = 0;
  let plain = "";
  const flush = () => {
    if (plain) parent.append(document.createTextNode(plain));
    plain = "";
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === "\\" && i + 1 < text.length && PUNCTUATION.test(text[i + 1])) {
      plain += text[i + 1];
      i += 2;
      continue;
    }
    if (c === "\n") {
      flush();
      parent.append(element("br"));
      i += 1;
      continue;
    }
    if (c === "`") {
      const run = runLength(text, i, "`");
      const close = findCodeClose(text, i + run, run, misses);
      if (close >= 0) {
        flush();
        parent.append(element("code", codeText(text.slice(i + run, close))));
        i = close + run;
      } else {
        plain += "`".repeat(run);
        i += run;
      }
      continue;
    }
    if (depth < MAX_DEPTH && (c === "*" || c === "_" || c === "~")) {
      const span = emphasis(text, i, misses);
      if (span) {
        flush();
        const node = element(span.tag);
        inline(node, span.inner, depth + 1);
        if (span.outer) {
          const outer = element(span.outer);
          outer.append(node);
          parent.append(outer);
        } else {
          parent.append(node);
        }
        i = span.end;
        continue;
      }
    }
    if (c === "[" || (c === "!" && text[i + 1] === "[")) {
      pairs = pairs || matchPairs(text);
      const link = linkAt(text, i, pairs);
      if (link) {
        flush();
        const href = URL_START.test(link.target) || /^[/#.]/.test(link.target)
          ? safeHref(link.target) : null;
        const label = link.image ? (link.label || link.target) : link.label;
        if (href) {
          const a = element("a");
          a.href = href;
          a.target = "_blank";
          a.rel = "noopener noreferrer";
          if (link.image) a.textContent = label;
          else inline(a, label, depth + 1);
          parent.append(a);
        } else {
          // Kept as text: a javascript: or data: link is not followed.
          inline(parent, label, depth + 1);
        }
        i = link.end;
        continue;
      }
    }
    if (c === "<") {
      const close = autolinkEnd(text, i);
      const inside = close > 0 ? text.slice(i + 1, close) : "";
      if (inside && safeHref(inside)) {
        flush();
        parent.append(anchor(inside));
        i = close + 1;
        continue;
      }
    }
    if ((c === "h" || c === "H") && i >= notUrlBefore && !/\w/.test(text[i - 1] || "")) {
      const found = bareUrlAt(text, i);
      if (found.url) {
        flush();
        parent.append(anchor(found.url));
        i += found.url.length;
        continue;
      }
      notUrlBefore = found.skip;
    }
    plain += c;
    i += 1;
  }
  flush();
}

function anchor(url) {
  const a = element("a", url);
  a.href = safeHref(url);
  a.target = "_blank";
  a.rel = "noopener noreferrer";
  return a;
}

// The bare URL that starts at `i`: {url}, or {skip} when there is none,
// with the position before which no other one starts. The address is read
// only once its host is known to be one: in "http://[/http://[/..." each
// "http" costs the few characters up to its host's end, not the rest.
function bareUrlAt(text, i) {
  BARE_URL_START.lastIndex = i;
  if (!BARE_URL_START.test(text)) return { skip: 0 };
  const host = BARE_URL_START.lastIndex;
  let k = host;
  while (k < text.length && k - host <= MAX_AUTHORITY && !AUTHORITY_END.test(text[k])) k += 1;
  if (k - host > MAX_AUTHORITY) return { skip: k };
  const whole = k === text.length || NOT_IN_URL.test(text[k]);
  if (!safeHref(whole ? trimUrl(text.slice(i, k)) : text.slice(i, k))) return { skip: 0 };
  while (k < text.length && !NOT_IN_URL.test(text[k])) k += 1;
  const url = trimUrl(text.slice(i, k));
  // Rare (the host was fine): the rest is text, "http"s inside it too.
  return safeHref(url) ? { url } : { skip: k };
}

// Where the autolink <scheme:address> that opens at `i` closes, or -1.
// An address holds no space and no "<", so the scan stops at the next one:
// a run of "<" costs one step each.
function autolinkEnd(text, i) {
  AUTOLINK_START.lastIndex = i + 1;
  if (!AUTOLINK_START.test(text)) return -1;
  for (let k = i + 1; k < text.length && k <= i + MAX_TARGET; k += 1) {
    const ch = text[k];
    if (ch === ">") return k;
    if (ch === "<" || /\s/.test(ch)) return -1;
  }
  return -1;
}

// A bare URL without the punctuation that ends the sentence around it.
function trimUrl(url) {
  let opened = 0;
  let closed = 0;
  for (const ch of url) {
    if (ch === "(") opened += 1;
    else if (ch === ")") closed += 1;
  }
  let end = url.length;
  while (end > 0) {
    const last = url[end - 1];
    if (/[.,;:!?*_~'"]/.test(last)) {
      end -= 1;
    } else if (last === ")") {
      if (closed <= opened) break;
      closed -= 1;
      end -= 1;
    } else {
      break;
    }
  }
  return url.slice(0, end);
}

function runLength(text, i, c) {
  let n = 0;
  while (text[i + n] === c) n += 1;
  return n;
}

function findCodeClose(text, from, run, misses) {
  const key = "`".repeat(run);
  if (misses.get(key) <= from) return -1;
  let i = from;
  while (i < text.length) {
    const next = text.indexOf("`", i);
    if (next < 0) break;
    const n = runLength(text, next, "`");
    if (n === run) return next;
    i = next + n;
  }
  misses.set(key, from);
  return -1;
}

function codeText(raw) {
  const text = raw.replace(/\n/g, " ");
  return text.length > 2 && text.startsWith(" ") && text.endsWith(" ") && text.trim()
    ? text.slice(1, -1) : text;
}

// The emphasis span that opens at `i`, or null: {tag, outer, inner, end}.
function emphasis(text, i, misses) {
  const c = text[i];
  const run = runLength(text, i, c);
  const before = text[i - 1] || " ";
  if (c === "~") {
    if (run !== 2) return null;
    return span(text, i, "~~", "del", undefined, misses);
  }
  // An underscore inside a word (snake_case) is a letter, not emphasis.
  if (c === "_" && /[\p{L}\p{N}]/u.test(before)) return null;
  if (run >= 3) {
    const both = span(text, i, c.repeat(3), "em", "strong", misses);
    if (both) return both;
  }
  if (run >= 2) {
    const strong = span(text, i, c + c, "strong", undefined, misses);
    if (strong) return strong;
  }
  return span(text, i, c, "em", undefined, misses);
}

function span(text, i, delimiter, tag, outer, misses) {
  const start = i + delimiter.length;
  const first = text[start];
  if (first === undefined || /\s/.test(first)) return null;
  const close = findClose(text, start, delimiter, misses);
  if (close < 0) return null;
  return { tag, outer, inner: text.slice(start, close), end: close + delimiter.length };
}

// Where `delimiter` closes a span that opened just before `from`: not after
// whitespace, not inside a code span, not a longer run of the same character
// (for single ones), and for underscores not inside a word.
function findClose(text, from, delimiter, misses) {
  if (misses.get(delimiter) <= from) return -1;
  const c = delimiter[0];
  let i = from;
  while (i < text.length) {
    const ch = text[i];
    if (ch === "\\") {
      i += 2;
      continue;
    }
    if (ch === "`") {
      const run = runLength(text, i, "`");
      const close = findCodeClose(text, i + run, run, misses);
      i = close >= 0 ? close + run : i + run;
      continue;
    }
    if (ch === c) {
      const run = runLength(text, i, c);
      const after = text[i + run] || " ";
      const fits = delimiter.length === 1 ? run === 1 : run >= delimiter.length;
      if (fits && i > from && !/\s/.test(text[i - 1]) &&
          !(c === "_" && /[\p{L}\p{N}]/u.test(after))) {
        // A longer closing run: the span closes at its last characters.
        return i + run - delimiter.length;
      }
      i += run;
      continue;
    }
    i += 1;
  }
  misses.set(delimiter, from);
  return -1;
}

// Every bracket's partner, found in one pass: `[` with its `]` (a
// backslash escapes the next character) and `(` with its `)`, nested; and
// where the next line break and the next blank line are. -1: none.
function matchPairs(text) {
  const partner = new Int32Array(text.length).fill(-1);
  const nextBreak = new Int32Array(text.length + 1).fill(-1);
  const nextBlank = new Int32Array(text.length + 1).fill(-1);
  const squares = [];
  const rounds = [];
  for (let k = 0; k < text.length; k += 1) {
    const ch = text[k];
    if (ch === "\\") {
      k += 1;
    } else if (ch === "[") {
      squares.push(k);
    } else if (ch === "]" && squares.length) {
      partner[squares.pop()] = k;
    }
  }
  for (let k = 0; k < text.length; k += 1) {
    const ch = text[k];
    if (ch === "(") rounds.push(k);
    else if (ch === ")" && rounds.length) partner[rounds.pop()] = k;
  }
  for (let k = text.length - 1; k >= 0; k -= 1) {
    nextBreak[k] = text[k] === "\n" ? k : nextBreak[k + 1];
    nextBlank[k] = text[k] === "\n" && text[k + 1] === "\n" ? k : nextBlank[k + 1];
  }
  return { partner, nextBreak, nextBlank };
}

// [label](target) or ![alt](target) at `i`: {label, target, image, end}, or null.
function linkAt(text, i, pairs) {
  const image = text[i] === "!";
  const open = image ? i + 1 : i;
  const close = pairs.partner[open];
  if (close < 0 || close >= open + MAX_LABEL || text[close + 1] !== "(") return null;
  // A blank line ends the label.
  const blank = pairs.nextBlank[open];
  if (blank >= 0 && blank < close) return null;
  const end = pairs.partner[close + 1];
  if (end < 0 || end >= close + MAX_TARGET) return null;
  const lineBreak = pairs.nextBreak[close + 1];
  if (lineBreak >= 0 && lineBreak < end) return null;
  let target = text.slice(close + 2, end).trim();
  // An optional title: kept out of the address, not shown.
  target = target.replace(/\s+("[^"]*"|'[^']*')$/, "");
  if (target.startsWith("<") && target.endsWith(">")) target = target.slice(1, -1);
  if (!target || /\s/.test(target)) return null;
  return { label: text.slice(open + 1, close), target, image, end: end + 1 };
}
