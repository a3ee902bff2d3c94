// axe-core (WCAG 2 A and AA rules) on pages opened in Debian's chromium by puppeteer-core; driven
// by tests/support/axe.py, which writes the job as JSON to stdin and reads the results (JSON) from
// stdout.
//
// job: {chromium, args, tags, route: {prefix, dir} | null, shots: dir | null,
//       pages: [{name, url, login: url | null, widths: [px], probe: expression | null}]}
// out: [{name, width, violations: [{id, impact, help, nodes: [{target, html, summary}]}],
//        offsite: [url], mathjax: version | null, shot: path | null, probe: value | null}]
//
// Requests leave the machine for no one: file:, data: and loopback load; a URL under
// route.prefix (formgrader's MathJax CDN) is answered from route.dir (Debian's libjs-mathjax, as
// tests/support/formgrader.py does); any other is recorded in `offsite` and fails.
import { readFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import puppeteer from "puppeteer-core";

const require = createRequire(import.meta.url);
const AXE = require.resolve("axe-core/axe.min.js");
const LOCAL = ["file:", "data:", "http://127.0.0.1", "http://localhost", "about:"];
const TYPES = { ".js": "application/javascript", ".json": "application/json", ".css": "text/css",
  ".woff": "font/woff", ".otf": "font/otf", ".eot": "application/vnd.ms-fontobject",
  ".svg": "image/svg+xml", ".ttf": "font/ttf", ".png": "image/png" };

function answer(route, url) {
  // a file of route.dir for a URL under route.prefix; latest.js loads MathJax.js as the CDN's does
  const [file, query] = url.slice(route.prefix.length).split("?");
  if (file === "latest.js") {
    const loader = "var s=document.createElement('script');" +
      `s.src='${route.prefix}MathJax.js?${query || ""}';document.head.appendChild(s);`;
    return { status: 200, contentType: TYPES[".js"], body: loader };
  }
  const full = path.resolve(route.dir, file);
  if (!full.startsWith(path.resolve(route.dir) + path.sep)) return null;
  try {
    const type = TYPES[path.extname(full)] || "application/octet-stream";
    return { status: 200, contentType: type, body: readFileSync(full) };
  } catch {
    return null;
  }
}

async function typeset(page) {
  // the page's MathJax (formgrader's, 2.7) done typesetting; none: nothing to wait for
  return page.evaluate(() => new Promise((done) => {
    const started = Date.now();
    const wait = () => {
      if (window.MathJax && MathJax.Hub && MathJax.isReady) MathJax.Hub.Queue(() => done(MathJax.version));
      else if (!window.MathJax && Date.now() - started > 1000) done(null);
      else if (Date.now() - started > 60000) done("not ready after 60 s");
      else setTimeout(wait, 100);
    };
    wait();
  }));
}

async function visit(browser, job, spec, width) {
  const page = await browser.newPage();
  const offsite = [];
  await page.setBypassCSP(true); // the report's CSP would refuse axe's script
  await page.setRequestInterception(true);
  page.on("request", (request) => {
    const url = request.url();
    if (LOCAL.some((prefix) => url.startsWith(prefix))) return request.continue();
    const found = job.route && url.startsWith(job.route.prefix) ? answer(job.route, url) : null;
    if (found) return request.respond(found);
    offsite.push(url);
    return request.abort("failed");
  });
  await page.setViewport({ width, height: 900 });
  if (spec.login) await page.goto(spec.login, { waitUntil: "load", timeout: 90000 });
  await page.goto(spec.url, { waitUntil: "load", timeout: 90000 });
  const mathjax = await typeset(page);
  const probe = spec.probe ? await page.evaluate(spec.probe) : null;
  await page.addScriptTag({ path: AXE });
  const result = await page.evaluate(async (tags) => {
    const found = await axe.run(document, {
      runOnly: { type: "tag", values: tags },
      resultTypes: ["violations"],
    });
    return found.violations.map((v) => ({
      id: v.id, impact: v.impact, help: v.help,
      nodes: v.nodes.map((n) => ({ target: n.target.map(String), html: n.html.slice(0, 300),
                                   summary: (n.failureSummary || "").slice(0, 500) })),
    }));
  }, job.tags);
  let shot = null;
  if (job.shots) {
    mkdirSync(job.shots, { recursive: true });
    shot = path.join(job.shots, `${spec.name}-${width}px.png`);
    await page.screenshot({ path: shot, fullPage: true });
  }
  await page.close();
  return { name: spec.name, width, violations: result, offsite, mathjax, shot, probe };
}

const job = JSON.parse(readFileSync(0, "utf8"));
const browser = await puppeteer.launch({
  executablePath: job.chromium, headless: true, args: job.args, timeout: 120000,
});
const out = [];
try {
  for (const spec of job.pages) {
    for (const width of spec.widths) out.push(await visit(browser, job, spec, width));
  }
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(out));
