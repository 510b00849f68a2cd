// Compiles every inputSchema and outputSchema of a tools/list (a JSON array of tools on stdin) with
// Ajv in strict mode, as AJV-based MCP clients do (ajv-formats for the standard formats), and prints
// one JSON report: {"checked": N, "warnings": [...], "errors": [...]}. Ajv's warnings are captured
// through its logger, so a warning is counted, not just printed.
import { createRequire } from "node:module";
const require = createRequire(import.meta.url);
const Ajv2020 = require("ajv/dist/2020").default;
const addFormats = require("ajv-formats").default;

let input = "";
for await (const chunk of process.stdin) input += chunk;
const tools = JSON.parse(input);
const warnings = [];
const errors = [];
let checked = 0;
for (const tool of tools) {
  for (const key of ["inputSchema", "outputSchema"]) {
    const schema = tool[key];
    if (schema === undefined) continue;
    const at = `${tool.name} ${key}`;
    const logger = {
      log: () => {},
      warn: (...args) => warnings.push(`${at}: ${args.join(" ")}`),
      error: (...args) => errors.push(`${at}: ${args.join(" ")}`),
    };
    const ajv = new Ajv2020({ strict: true, allErrors: true, logger });
    addFormats(ajv);
    try {
      ajv.compile(schema);
      checked += 1;
    } catch (e) {
      errors.push(`${at}: ${e.message}`);
    }
  }
}
console.log(JSON.stringify({ checked, warnings, errors }));
