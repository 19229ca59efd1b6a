// How much work the chat page's Markdown renderer does on a text, counted
// rather than timed: V8's block coverage counts every JavaScript block the
// renderer runs (a loop's body once per turn), and the string and RegExp
// built-ins it calls count the characters they scan or copy. Run by
// tests/server/page/test_markdown_work.py:
//   node markdown_work.mjs RENDERER.js < cases.json   (prints JSON)
// cases.json: [[name, text], ...]; prints {name: {blocks, characters}, ...}.
import { readFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { pathToFileURL } from "node:url";

let work = 0;
const len = (value) => (typeof value === "string" ? value.length : 0);

function counted(proto, name, cost) {
  const original = proto[name];
  Object.defineProperty(proto, name, {
    value: function (...args) {
      const result = Reflect.apply(original, this, args);
      work += cost(this, args, result);
      return result;
    },
    writable: true,
    configurable: true,
  });
}

const S = String.prototype;
const scanned = (self, args, result, width) =>
  (result >= 0 ? result + width : self.length) - Math.max(0, args[1] | 0);
const originalIndexOf = S.indexOf;
counted(S, "indexOf", (self, args, r) => scanned(self, args, r, len(args[0])));
counted(S, "lastIndexOf", (self) => self.length);
counted(S, "includes", (self, args) => {
  const at = Reflect.apply(originalIndexOf, self, args);
  return scanned(self, args, at, len(args[0]));
});
for (const name of ["slice", "substring", "substr", "repeat", "padStart", "padEnd"]) {
  counted(S, name, (self, args, r) => len(r) + 1);
}
for (const name of ["split", "trim", "trimStart", "trimEnd", "replace", "replaceAll",
                    "match", "matchAll", "search", "toLowerCase", "toUpperCase",
                    "startsWith", "endsWith", "normalize"]) {
  counted(S, name, (self) => self.length + 1);
}
counted(Array.prototype, "join", (self, args, r) => len(r) + 1);
const R = RegExp.prototype;
// A sticky or ^-anchored search reads what it matched; any other, the rest
// of its input.
for (const name of ["exec", "test"]) {
  const original = R[name];
  Object.defineProperty(R, name, {
    value: function (input) {
      const from = this.global || this.sticky ? this.lastIndex : 0;
      const result = Reflect.apply(original, this, [input]);
      if (this.sticky) {
        work += (result ? this.lastIndex - from : 0) + 1;
      } else if (this.source.startsWith("^") && !this.multiline && name === "exec") {
        work += (result ? result[0].length : 0) + 1;
      } else {
        work += String(input).length - from + 1;
      }
      return result;
    },
    writable: true,
    configurable: true,
  });
}
const NativeURL = URL;
globalThis.URL = class extends NativeURL {
  constructor(url, base) {
    work += String(url).length + 1;
    super(url, base);
  }
};

class FakeNode {
  constructor(tag) {
    this.tag = tag;
    this.children = [];
    this.dataset = {};
  }
  append(...nodes) {
    this.children.push(...nodes);
  }
}
globalThis.document = {
  baseURI: "http://127.0.0.1:8642/",
  createDocumentFragment: () => new FakeNode("#fragment"),
  createElement: (tag) => new FakeNode(tag),
  createTextNode: (text) => ({ text }),
};

const session = new Session();
session.connect();
await session.post("Profiler.enable");
await session.post("Profiler.startPreciseCoverage", { callCount: true, detailed: true });
const renderer = pathToFileURL(process.argv[2]).href;
const { renderMarkdown } = await import(renderer);

async function blocksRun() {
  const { result } = await session.post("Profiler.takePreciseCoverage");
  let count = 0;
  for (const script of result) {
    if (script.url !== renderer) continue;
    for (const fn of script.functions) {
      for (const range of fn.ranges) count += range.count;
    }
  }
  return count;
}

const cases = JSON.parse(readFileSync(0, "utf8"));
const steps = {};
for (const [name, text] of cases) {
  await blocksRun(); // resets the counters
  work = 0;
  renderMarkdown(text);
  const characters = work;
  steps[name] = { blocks: await blocksRun(), characters };
}
process.stdout.write(JSON.stringify(steps));
