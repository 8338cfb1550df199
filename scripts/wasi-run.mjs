// Runs a wasm32-wasip1 command (a cargo test binary) under Node's WASI, so
// the core's unit tests also run compiled to wasm, as in Envoy.
import { readFile } from "node:fs/promises";
import { WASI } from "node:wasi";
import process from "node:process";

const [file, ...args] = process.argv.slice(2);
const wasi = new WASI({ version: "preview1", args: [file, ...args], env: process.env, returnOnExit: true });
const module = await WebAssembly.compile(await readFile(file));
const imports = wasi.getImportObject();
// proxy-wasm's exported callbacks import host functions the tests never call:
// give them stubs that fail loudly if they ever are.
for (const imp of WebAssembly.Module.imports(module)) {
  if (imp.kind !== "function" || imports[imp.module]?.[imp.name]) continue;
  imports[imp.module] ??= {};
  imports[imp.module][imp.name] = () => {
    throw new Error(`host function ${imp.module}.${imp.name} is not available in unit tests`);
  };
}
const instance = await WebAssembly.instantiate(module, imports);
// A command that also links the filter (a bench binary) exports the filter's
// `_initialize` next to its own `_start`; WASI refuses both, so run `_start`.
const { _start, memory } = instance.exports;
process.exitCode = wasi.start({ exports: { _start, memory } });
