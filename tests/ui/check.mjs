// Headless-Chromium check of the /ui inspection page.
//
//   node check.mjs URL
//
// URL is the server's base (http://127.0.0.1:PORT) with the fixture sessions
// loaded; tests/ui/run.sh sets everything up. Environment:
//   UI_USER             the user the fixtures were added under (fixtures)
//   UI_SESSIONS_FILE    the expected session ids, one a line
//   UI_QUERY_FIXTURE    a fixture file: its first message is typed into the
//                       search box and its session must rank first
//   UI_API_KEY          the server's API key, when it requires one: the page
//                       must ask for it, then work once it is entered
//   UI_SCREENSHOT       where to save a full-page screenshot (optional)
//   UI_REQUIRE_DELIVERED=1  also require POST /v1/search to deliver that
//                       session first (otherwise a mismatch is a warning)
//   CHROMIUM            the browser (default /usr/bin/chromium)
import { readFileSync } from 'node:fs';
import { chromium } from 'playwright-core';

const TIMEOUT_MS = 20_000;

const base = (process.argv[2] || '').replace(/\/+$/, '');
if (!/^https?:\/\//.test(base)) {
  console.error('usage: node check.mjs http://HOST:PORT');
  process.exit(2);
}
const origin = new URL(base).origin;
const user = process.env.UI_USER || 'fixtures';
const apiKey = process.env.UI_API_KEY || '';
const screenshotPath = process.env.UI_SCREENSHOT || '';
const requireDelivered = process.env.UI_REQUIRE_DELIVERED === '1';

function need(name) {
  const value = process.env[name];
  if (!value) fail(`${name} is not set`);
  return value;
}
const expectedSessions = readFileSync(need('UI_SESSIONS_FILE'), 'utf8').split('\n').map((s) => s.trim()).filter(Boolean);
const queryFixture = JSON.parse(readFileSync(need('UI_QUERY_FIXTURE'), 'utf8'));
const querySession = queryFixture.source.session_id;
const queryText = queryFixture.messages[0].content;
// A textarea's value holds line breaks as LF: what the page sends.
const typedQuery = queryText.replace(/\r\n?/g, '\n');

const failures = [];
const warnings = [];
function fail(message) {
  console.error(`FAIL: ${message}`);
  process.exit(1);
}
function check(condition, message) {
  if (!condition) throw new Error(message);
}
function step(message) {
  console.log(`- ${message}`);
}

// What the browser did, checked at the end. During `tolerate`, HTTP errors of
// the given status (and Chromium's console line about them) are expected.
const consoleErrors = [];
const pageErrors = [];
const failedRequests = [];
const foreignRequests = [];
const badResponses = [];
let tolerated = null;

async function tolerate(status, action) {
  tolerated = status;
  try {
    return await action();
  } finally {
    tolerated = null;
  }
}

async function apiGet(path) {
  const headers = apiKey ? { Authorization: `Bearer ${apiKey}` } : {};
  const response = await fetch(base + path, { headers });
  if (!response.ok) throw new Error(`GET ${path}: HTTP ${response.status} ${await response.text()}`);
  return response.json();
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: [
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
  ],
});
let exitCode = 0;
let page = null;
try {
  console.log(`Chromium ${browser.version()} against ${base}`);
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, deviceScaleFactor: 1 });
  page = await context.newPage();
  page.setDefaultTimeout(TIMEOUT_MS);

  page.on('console', (message) => {
    if (message.type() !== 'error') return;
    const text = message.text();
    if (tolerated && text.includes(`status of ${tolerated}`)) return;
    consoleErrors.push(text);
  });
  page.on('pageerror', (error) => pageErrors.push(String(error && error.stack ? error.stack : error)));
  page.on('request', (request) => {
    const url = request.url();
    if (url.startsWith('data:') || url.startsWith('about:')) return;
    let requestOrigin = '';
    try { requestOrigin = new URL(url).origin; } catch { /* unparsable */ }
    if (requestOrigin !== origin) foreignRequests.push(`${request.method()} ${url}`);
  });
  page.on('requestfailed', (request) => {
    failedRequests.push(`${request.method()} ${request.url()}: ${request.failure()?.errorText || 'failed'}`);
  });
  page.on('response', (response) => {
    const status = response.status();
    if (status < 400) return;
    if (tolerated === status) return;
    badResponses.push(`${response.request().method()} ${response.url()}: HTTP ${status}`);
  });

  // 1. The page loads; with a keyed server it asks for the key first.
  if (apiKey) {
    step('open /ui without a key: the page asks for one');
    await tolerate(401, async () => {
      await page.goto(`${base}/ui`);
      const banner = page.getByTestId('auth-required');
      await banner.waitFor({ state: 'visible' }).catch(() => {
        throw new Error('no API-key message (data-testid=auth-required) shown on 401');
      });
      const text = await banner.innerText();
      check(/API key/i.test(text), `the 401 message does not mention the API key: ${JSON.stringify(text)}`);
      check(/missing or invalid API key/.test(text), `the 401 message does not show the server's reason: ${JSON.stringify(text)}`);
      await page.waitForTimeout(300); // lets the console report of the 401 arrive while tolerated
    });
    step('enter the key');
    await page.fill('#api-key', apiKey);
    await page.click('#api-key-save');
    await page.getByTestId('auth-required').waitFor({ state: 'hidden' });
  } else {
    step('open /ui');
    await page.goto(`${base}/ui`);
  }

  // 2. The user is listed; its page lists every fixture session.
  step(`user "${user}" is listed`);
  const userRow = page.locator(`[data-testid="user-row"][data-user-id="${user}"]`);
  await userRow.waitFor().catch(() => { throw new Error(`user "${user}" not in the users list`); });
  await userRow.locator('a').click();
  await page.waitForFunction((u) => location.hash === `#/u/${encodeURIComponent(u)}`, user);
  await page.locator('#sessions[data-state="done"]').waitFor().catch(async () => {
    const error = await page.getByTestId('error-banner').innerText().catch(() => '');
    throw new Error(`the session list did not load${error ? `: ${error}` : ''}`);
  });
  const listed = await page.locator('[data-testid="session-row"]').evaluateAll((rows) => rows.map((row) => row.dataset.sessionId));
  const missing = expectedSessions.filter((id) => !listed.includes(id));
  const extra = listed.filter((id) => !expectedSessions.includes(id));
  check(missing.length === 0 && extra.length === 0 && listed.length === expectedSessions.length,
    `session list: ${listed.length} rows, expected ${expectedSessions.length}; missing ${JSON.stringify(missing)}; unexpected ${JSON.stringify(extra)}`);
  step(`all ${expectedSessions.length} fixture sessions listed`);
  const badges = await page.locator('[data-testid="session-row"] [data-testid="status-badge"]').count();
  check(badges === expectedSessions.length, `expected a status badge per session row, found ${badges}`);

  // The list's filters: outcome, source and date, as the API reports them.
  step('filter the sessions by outcome, source and date');
  const summaries = (await apiGet(`/v1/sessions?user_id=${encodeURIComponent(user)}`)).data;
  const visibleRows = () => page.locator('[data-testid="session-row"]:not([hidden])').count();
  for (const status of ['resolved', 'failed', 'unknown']) {
    await page.selectOption('[data-testid="outcome-filter"]', status);
    const expected = summaries.filter((s) => s.status === status).length;
    check(await visibleRows() === expected, `outcome ${status}: ${await visibleRows()} rows shown, expected ${expected}`);
  }
  await page.selectOption('[data-testid="outcome-filter"]', '');
  await page.selectOption('[data-testid="source-filter"]', 'git');
  check(await visibleRows() === summaries.filter((s) => s.session_id.startsWith('git:')).length, 'source filter: git history rows');
  await page.selectOption('[data-testid="source-filter"]', 'api');
  check(await visibleRows() === summaries.filter((s) => !s.session_id.startsWith('git:')).length, 'source filter: API rows');
  await page.selectOption('[data-testid="source-filter"]', '');
  await page.fill('[data-testid="since-filter"]', '2999-01-01');
  check(await visibleRows() === 0, 'a date after every update still shows rows');
  await page.fill('[data-testid="since-filter"]', '');
  check(await visibleRows() === expectedSessions.length, 'clearing the filters does not show every session again');

  // 3. A session page: files changed and evidence with provenance.
  const detail = await apiGet(`/v1/sessions/${encodeURIComponent(querySession)}?user_id=${encodeURIComponent(user)}`);
  step(`open session ${querySession}`);
  await page.locator(`[data-testid="session-row"][data-session-id="${querySession}"] a[data-testid="session-link"]`).click();
  await page.waitForFunction((h) => location.hash === h, `#/u/${encodeURIComponent(user)}/s/${encodeURIComponent(querySession)}`);
  await checkSessionPage(page, detail);

  step('back and forward');
  await page.goBack();
  await page.locator('#sessions[data-state="done"]').waitFor();
  await page.goForward();
  await page.getByTestId('session-view').waitFor();

  // A session id with '/' and ':' opened by its link alone.
  const slashed = expectedSessions.find((id) => id.includes('/') && id.includes(':'));
  if (slashed) {
    step(`open ${slashed} by URL`);
    await page.goto(`${base}/ui#/u/${encodeURIComponent(user)}/s/${encodeURIComponent(slashed)}`);
    const slashedDetail = await apiGet(`/v1/sessions/${encodeURIComponent(slashed)}?user_id=${encodeURIComponent(user)}`);
    await checkSessionPage(page, slashedDetail);
  }

  // The API's reason is shown for a session that does not exist.
  step('an unknown session shows the API\'s reason');
  await tolerate(404, async () => {
    await page.goto(`${base}/ui#/u/${encodeURIComponent(user)}/s/no-such-session`);
    const banner = page.getByTestId('error-banner');
    await banner.waitFor({ state: 'visible' });
    const text = await banner.innerText();
    check(text.includes('no session "no-such-session"'), `the error banner does not show the API's reason: ${JSON.stringify(text)}`);
    await page.waitForTimeout(300);
  });

  // 4. Search with the task statement of the query fixture.
  step('search with the task statement of the query fixture');
  await page.goto(`${base}/ui#/u/${encodeURIComponent(user)}`);
  await page.locator('#sessions[data-state="done"]').waitFor();
  await page.fill('#search-input', queryText);
  await page.click('#search-button');
  const state = await searchAnswered(page, typedQuery);
  if (state !== 'done') {
    const error = await page.getByTestId('error-banner').innerText().catch(() => '');
    throw new Error(`the search failed: ${error}`);
  }
  const hashQuery = await page.evaluate(() => new URLSearchParams(location.hash.split('?')[1] || '').get('q'));
  check(hashQuery === typedQuery, 'the search URL does not hold the query as typed');
  const candidates = await page.locator('[data-testid="candidate-row"]').evaluateAll((rows) => rows.map((row) => ({
    session: row.dataset.sessionId,
    verdict: row.querySelector('[data-testid="verdict"]')?.dataset.verdict,
  })));
  check(candidates.length > 0, 'no ranked candidate shown');
  const sessionColumn = await page.locator('#candidates-table th:nth-child(5)').evaluate((th) => th.getBoundingClientRect().width);
  check(sessionColumn >= 200, `the ranking's session column is ${sessionColumn}px wide: the table does not fit`);
  check(candidates[0].session === querySession,
    `first ranked candidate is ${candidates[0].session}, expected ${querySession} (ranking: ${candidates.slice(0, 5).map((c) => c.session).join(', ')})`);
  step(`first ranked candidate: ${candidates[0].session} (verdict: ${candidates[0].verdict})`);
  // What the agent receives comes first, the ranking that explains it after.
  const panelOrder = await page.locator('[data-testid="delivered"], [data-testid="ranking"]').evaluateAll((panels) => panels.map((panel) => panel.dataset.testid));
  check(panelOrder[0] === 'delivered' && panelOrder.includes('ranking'),
    `the page shows ${panelOrder.join(', ')}: what the agent receives must come before the ranking`);
  const delivered = await page.locator('[data-testid="result-row"]').evaluateAll((rows) => rows.map((row) => row.dataset.sessionId));
  if (delivered[0] === querySession) {
    step(`first delivered item comes from ${querySession}`);
  } else {
    const message = delivered.length === 0
      ? `POST /v1/search delivered no item for this query (the top candidate's verdict: ${candidates[0].verdict})`
      : `POST /v1/search delivered ${delivered[0]} first, not ${querySession}`;
    if (requireDelivered) throw new Error(message);
    warnings.push(message);
    const shown = await page.locator('[data-testid="delivered-empty"], [data-testid="result-row"]').count();
    check(shown > 0, 'the delivered section shows neither items nor an explanation of their absence');
  }
  // Clicking a session id in the ranking opens its page.
  step('a session id in the ranking opens its page');
  await page.locator(`[data-testid="candidate-row"][data-rank="1"] a[data-testid="session-link"]`).click();
  await page.getByTestId('session-view').waitFor();
  check(await page.getByTestId('session-view').getAttribute('data-session-id') === querySession, 'the ranking link opened another session');
  await page.goBack();
  await searchAnswered(page, typedQuery);
  // A search whose answer has items: they carry their session and provenance.
  step('a search with delivered items');
  const errorQuery = 'ValueError: Scalar operands are not allowed, use \'*\' instead in sympy/matrices/common.py __matmul__';
  await page.fill('#search-input', errorQuery);
  await page.selectOption('#search-topk', '3');
  await page.press('#search-input', 'Enter');
  check(await searchAnswered(page, errorQuery) === 'done', 'the second search failed');
  const items = await page.locator('[data-testid="result-row"]').evaluateAll((rows) => rows.map((row) => ({ session: row.dataset.sessionId, kind: row.dataset.kind })));
  check(items.length > 0, 'no delivered item for a query naming an error and a file of a stored session');
  check(items.length <= 3, `top 3 asked, ${items.length} items delivered`);
  check(items.every((item) => expectedSessions.includes(item.session)), `a delivered item names an unknown session: ${JSON.stringify(items)}`);
  check(await page.evaluate(() => new URLSearchParams(location.hash.split('?')[1] || '').get('k')) === '3', 'top_k not kept in the URL');

  check(await page.locator('[data-testid="verdict"][data-verdict="kept"]').count() > 0, 'no candidate shown as kept');

  if (screenshotPath) {
    await page.screenshot({ path: screenshotPath, fullPage: true });
    step(`screenshot of the search page saved to ${screenshotPath}`);
  }
} catch (error) {
  failures.push(error && error.message ? error.message : String(error));
  if (page) {
    const where = await page.evaluate(() => {
      const href = location.href.length > 160 ? `${location.href.slice(0, 160)}…` : location.href;
      return `${href}\n    ${document.getElementById('view')?.innerText.slice(0, 400).replace(/\n+/g, ' | ')}`;
    }).catch(() => '');
    if (where) failures.push(`the page was at ${where}`);
  }
} finally {
  await browser.close();
}

// 5. Nothing went wrong on the way.
if (consoleErrors.length) failures.push(`console errors:\n    ${consoleErrors.join('\n    ')}`);
if (pageErrors.length) failures.push(`uncaught page errors:\n    ${pageErrors.join('\n    ')}`);
if (failedRequests.length) failures.push(`failed requests:\n    ${failedRequests.join('\n    ')}`);
if (badResponses.length) failures.push(`unexpected HTTP errors:\n    ${badResponses.join('\n    ')}`);
if (foreignRequests.length) failures.push(`requests to another host:\n    ${foreignRequests.join('\n    ')}`);

for (const warning of warnings) console.warn(`WARNING: ${warning}`);
if (failures.length) {
  for (const failure of failures) console.error(`FAIL: ${failure}`);
  exitCode = 1;
} else {
  console.log('PASS: the /ui page works');
}
process.exit(exitCode);

// Waits for the search of `query` to be answered; its state, done or error.
async function searchAnswered(page, query) {
  const handle = await page.waitForFunction((q) => {
    const results = document.getElementById('search-results');
    if (!results || results.dataset.q !== q) return false;
    return results.dataset.state === 'done' || results.dataset.state === 'error' ? results.dataset.state : false;
  }, query);
  return handle.jsonValue();
}

// The session page shows the record's files changed and every evidence item
// with its provenance (request id and message index).
async function checkSessionPage(page, detail) {
  const view = page.getByTestId('session-view');
  await page.waitForFunction((id) => document.querySelector('[data-testid="session-view"]')?.dataset.sessionId === id, detail.session_id).catch(async () => {
    const error = await page.getByTestId('error-banner').innerText().catch(() => '');
    throw new Error(`session page of ${detail.session_id} not shown${error ? `: ${error}` : ''}`);
  });
  check(await view.getAttribute('data-session-id') === detail.session_id,
    `session page shows ${await view.getAttribute('data-session-id')}, expected ${detail.session_id}`);
  const files = await page.locator('[data-testid="files-changed"] li').allInnerTexts();
  check(detail.files_changed.length > 0, `fixture session ${detail.session_id} has no files_changed to check`);
  check(JSON.stringify(files) === JSON.stringify(detail.files_changed),
    `files changed shown ${JSON.stringify(files)}, expected ${JSON.stringify(detail.files_changed)}`);
  const evidence = await page.locator('[data-testid="evidence-item"]').evaluateAll((items) => items.map((item) => {
    const source = item.querySelector('[data-testid="evidence-source"]');
    return {
      kind: item.dataset.kind,
      request_id: source?.dataset.requestId,
      message_index: source ? Number(source.dataset.messageIndex) : undefined,
      sourceText: source?.textContent || '',
      text: item.querySelector('pre')?.textContent || '',
    };
  }));
  check(evidence.length === detail.evidence.length, `${evidence.length} evidence items shown, expected ${detail.evidence.length}`);
  detail.evidence.forEach((expected, i) => {
    const shown = evidence[i];
    check(shown.kind === expected.kind, `evidence ${i + 1}: kind ${shown.kind}, expected ${expected.kind}`);
    check(expected.source, `evidence ${i + 1} of ${detail.session_id} has no source in the API answer`);
    check(shown.request_id === expected.source.request_id && shown.message_index === expected.source.message_index,
      `evidence ${i + 1}: provenance ${shown.request_id}#${shown.message_index}, expected ${expected.source.request_id}#${expected.source.message_index}`);
    check(shown.sourceText.includes(expected.source.request_id), `evidence ${i + 1}: request id not visible`);
    check(shown.text === expected.text.replace(/\r\n?/g, '\n'), `evidence ${i + 1}: text differs from the API's`);
  });
  step(`session page: ${files.length} file(s) changed, ${evidence.length} evidence item(s) with provenance`);

  // The session's messages, on demand, as GET /v1/messages gives them.
  const messages = await apiGet(`/v1/messages?user_id=${encodeURIComponent(user)}&session_id=${encodeURIComponent(detail.session_id)}&limit=100`);
  await page.getByTestId('messages-more').click();
  await page.locator('[data-testid="messages"][data-state="done"]').waitFor();
  const roles = await page.locator('[data-testid="message-row"]').evaluateAll((rows) => rows.map((row) => row.dataset.role));
  check(roles.length === messages.data.length && roles.length > 0,
    `${roles.length} messages shown, expected ${messages.data.length}`);
  check(JSON.stringify(roles) === JSON.stringify(messages.data.map((m) => m.role)), 'message roles differ from the API\'s');
  step(`session page: ${roles.length} message(s) shown on demand`);
}
