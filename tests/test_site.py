"""The static leaderboard site, driven in a real headless browser (Debian chromium via selenium/chromedriver)."""
from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from genbench.errors import GenbenchError

from genbench.leaderboard.site import MARKER, write_site
from site_records import (ADJ_REFUSAL, BIG_ZOO, CITATIONS, FAIL_REASON, LONG_TITLE, SCR_THRESHOLD, SIGN_ERROR_NOTE,
                          XSS_TITLE, ZOO1, ZOO2, make_ablation, make_many_records, make_records)

ALIASES = {"norm.fro_sum"}  # shown as norm.fro_prod, not in a row of their own
PWN_MARKER = "window.__pwned = 'untouched';"


def in_ci() -> bool:
    """Whether the CI environment variable is set (then a missing browser is a failure, not a skip)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def find_binary(env: str, *names: str) -> str | None:
    """The executable named by `env` when it is set, else the first of `names` on PATH or in /usr/bin."""
    if os.environ.get(env):
        return shutil.which(os.environ[env])
    for name in names:
        path = shutil.which(name) or shutil.which(name, path="/usr/bin")
        if path:
            return path
    return None


def kfold(rec: dict[str, Any]) -> float | None:
    """The k-fold R^2 of a record (None when it has none)."""
    return ((rec.get("scores") or {}).get("values") or {}).get("kfold_r2")


@pytest.fixture(scope="module")
def records() -> list[dict[str, Any]]:
    """The fabricated records, built once."""
    return make_records()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, records: list[dict[str, Any]]) -> Path:
    """The site written once for every browser test; its index.html."""
    out = tmp_path_factory.mktemp("site") / "html"
    return write_site(records, out, ablation=make_ablation(), title="test leaderboard")


@pytest.fixture(scope="module")
def big_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site of one zoo with 24 measures, a baseline row and an alias (long citations, a long submission title)."""
    return write_site(make_many_records(), tmp_path_factory.mktemp("big") / "html", title="test leaderboard")


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    """Headless Debian chromium under chromedriver; skips locally, fails in CI, when either is missing."""
    chromium = find_binary("GENBENCH_CHROMIUM", "chromium", "chromium-browser")
    chromedriver = find_binary("GENBENCH_CHROMEDRIVER", "chromedriver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        webdriver = None
    missing = [what for what, ok in (("chromium", chromium), ("chromedriver", chromedriver),
                                     ("selenium", webdriver)) if not ok]
    if missing:
        msg = f"browser test needs {', '.join(missing)} (apt-get install chromium chromium-driver; pip selenium)"
        if in_ci():
            pytest.fail(msg + " and CI is set: the browser test must run")
        pytest.skip(msg)
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000", "--no-first-run", "--disable-extensions"):
        opts.add_argument(arg)
    drv = webdriver.Chrome(service=Service(chromedriver), options=opts)
    # a marker set before any page script runs; a script smuggled in through record text would change it
    drv.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": PWN_MARKER})
    drv.set_page_load_timeout(20)
    yield drv
    drv.quit()


def load(drv: Any, url: str) -> None:
    """Open a page and wait until its script has wired up the tables."""
    from selenium.webdriver.support.ui import WebDriverWait

    drv.get(url)
    WebDriverWait(drv, 10).until(lambda d: d.execute_script(
        "return document.documentElement.getAttribute('data-ready') === '1'"))


def visible_names(drv: Any, zoo: str) -> list[str]:
    """Entry names of the displayed rows of a zoo's table, top to bottom."""
    from selenium.webdriver.common.by import By

    rows = drv.find_elements(By.CSS_SELECTOR, f'table.leaderboard[data-zoo="{zoo}"] tbody tr')
    return [r.get_attribute("data-name") for r in rows if r.is_displayed()]


def header(drv: Any, zoo: str, text: str) -> Any:
    """The header cell of a zoo's table whose text starts with `text`."""
    from selenium.webdriver.common.by import By

    for th in drv.find_elements(By.CSS_SELECTOR, f'table.leaderboard[data-zoo="{zoo}"] thead th'):
        if th.text.strip().startswith(text):
            return th
    raise AssertionError(f"no header {text!r}")


def assert_not_pwned(drv: Any) -> None:
    """No script from record text ran: the marker is intact, the title is ours, no injected image exists."""
    assert drv.execute_script("return window.__pwned") == "untouched"
    assert drv.title != "pwned"
    assert drv.execute_script("return document.images.length") == 0


def test_write_site_replaces_its_own_output_and_refuses_foreign_dirs(tmp_path: Path) -> None:
    out = tmp_path / "web"
    first = write_site(make_records(), out)
    (out / "stale.html").write_text("old")
    second = write_site(make_records()[:2], out)
    assert first == second == out / "index.html" and (out / MARKER).exists()
    assert not (out / "stale.html").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["web"]  # no temporary directories left behind
    foreign = tmp_path / "home"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("precious")
    with pytest.raises(GenbenchError, match="holds files and is not a genbench site"):
        write_site(make_records(), foreign)
    assert (foreign / "thesis.tex").read_text() == "precious"
    with pytest.raises(GenbenchError, match="thesis.tex is a file, not a folder for the site"):
        write_site(make_records(), foreign / "thesis.tex")
    assert (foreign / "thesis.tex").read_text() == "precious"
    empty = write_site([], tmp_path / "empty")
    assert "No records" in empty.read_text()


def test_index_ranked_tables(driver: Any, site: Path, records: list[dict[str, Any]], tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    load(driver, site.as_uri())
    z1 = sorted((r for r in records if r["zoo"]["name"] == ZOO1 and r["status"] == "ok" and r["name"] not in ALIASES),
                key=lambda r: -kfold(r))
    assert visible_names(driver, ZOO1) == [r["name"] for r in z1]  # failed ones apart, aliases folded in
    assert "baseline.hparams" in visible_names(driver, ZOO1)
    z2 = sorted((r for r in records if r["zoo"]["name"] == ZOO2), key=lambda r: -kfold(r))
    assert visible_names(driver, ZOO2) == [r["name"] for r in z2]
    ranks = [td.text for td in driver.find_elements(
        By.CSS_SELECTOR, f'table.leaderboard[data-zoo="{ZOO2}"] tbody tr td:first-child')]
    assert ranks == ["1", "2"]
    missing_row = driver.find_element(By.CSS_SELECTOR,
                                      f'table.leaderboard[data-zoo="{ZOO1}"] tr[data-name="spectral_gap"]')
    assert "\u2013" in missing_row.text  # NaN and missing shown as an en dash
    failed = driver.find_elements(By.CSS_SELECTOR, f'.failed-entries[data-zoo="{ZOO1}"] li')
    assert [li.get_attribute("data-name") for li in failed] == ["hangs"] and FAIL_REASON in failed[0].text
    assert not driver.find_elements(By.CSS_SELECTOR, f'.failed-entries[data-zoo="{ZOO2}"]')
    agg = driver.find_element(By.ID, "aggregate")
    assert "mean" in agg.find_element(By.TAG_NAME, "caption").text.lower()
    assert len(agg.find_elements(By.CSS_SELECTOR, "tbody tr")) == 5  # 4 measures and the baseline, as a reference
    base = agg.find_elements(By.CSS_SELECTOR, "tbody tr.baseline")
    assert [tr.get_attribute("data-name") for tr in base] == ["baseline.hparams"] and "baseline" in base[0].text
    verdicts = driver.find_elements(By.CSS_SELECTOR, "section.zoo > p.verdict")
    assert len(verdicts) == 2 and all(v.is_displayed() and v.text.endswith(".") for v in verdicts)
    ablation = driver.find_element(By.ID, "ablation")
    assert "Table 1" in ablation.text and "Table 4" in ablation.text and "negative" in ablation.text
    shot = tmp_path / "index.png"
    assert driver.save_screenshot(str(shot))
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_sort_by_clicking_headers(driver: Any, site: Path, records: list[dict[str, Any]]) -> None:
    load(driver, site.as_uri())
    header(driver, ZOO1, "Entry").click()
    assert visible_names(driver, ZOO1) == ["baseline.hparams", "margin.qrt_log", "norm.fro_prod", "norm.path",
                                           "spectral_gap"]
    z1 = [r for r in records if r["zoo"]["name"] == ZOO1 and r["status"] == "ok" and r["name"] not in ALIASES]
    ok = sorted((r for r in z1 if kfold(r) is not None), key=kfold)
    missing = [r["name"] for r in z1 if kfold(r) is None]
    th = header(driver, ZOO1, "k-fold")
    th.click()  # higher is better: best first
    assert visible_names(driver, ZOO1) == [r["name"] for r in reversed(ok)] + missing
    assert th.get_attribute("aria-sort") == "descending"
    th.click()  # reversed; missing values stay last
    assert visible_names(driver, ZOO1) == [r["name"] for r in ok] + missing
    assert th.get_attribute("aria-sort") == "ascending"
    assert header(driver, ZOO1, "Entry").get_attribute("aria-sort") == "none"


def test_filter_hides_rows(driver: Any, site: Path) -> None:
    from selenium.webdriver.common.by import By

    load(driver, site.as_uri())
    box = driver.find_element(By.CSS_SELECTOR, f'input.row-filter[data-table="table-{ZOO1}"]')
    box.send_keys("margin")
    assert visible_names(driver, ZOO1) == ["margin.qrt_log"]
    assert driver.find_element(By.ID, f"table-{ZOO1}-count").text == "1 of 5 entries shown"
    assert len(visible_names(driver, ZOO2)) == 2  # each zoo has its own filter
    box.clear()
    box.send_keys("NEYSHABUR")  # citation, case-insensitive
    assert visible_names(driver, ZOO1) == ["norm.path"]
    box.clear()
    box.send_keys("signature")  # kind
    assert visible_names(driver, ZOO1) == ["margin.qrt_log"]
    box.clear()
    box.send_keys("fro_sum")  # an alias finds the entry that stands for it
    assert visible_names(driver, ZOO1) == ["norm.fro_prod"]
    box.clear()
    box.send_keys("baseline")
    assert visible_names(driver, ZOO1) == ["baseline.hparams"]
    box.clear()
    box.send_keys(" ")
    assert len(visible_names(driver, ZOO1)) == 5


def test_badges_explain_themselves(driver: Any, site: Path) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    load(driver, site.as_uri())
    row = f'table.leaderboard[data-zoo="{ZOO1}"] tr[data-name="%s"] td[data-col="fragility"] .badge'
    fragile = driver.find_element(By.CSS_SELECTOR, row % "norm.path")
    ActionChains(driver).move_to_element(fragile).perform()
    tip = fragile.get_attribute("title")
    assert fragile.text == "fragile-value; inconclusive: trend, scaling"
    assert "badge-fragile" in fragile.get_attribute("class")  # a failed part outweighs the missing ones
    assert "FAILED fragile-value" in tip and "spurious-change rate = 0.600" in tip and SCR_THRESHOLD in tip
    assert "passed fragile-trend" in tip and "n/a fragile-scale" in tip
    assert "could not run: trend: no learning curves" in tip
    robust = driver.find_element(By.CSS_SELECTOR, row % "margin.qrt_log")
    assert robust.text == "robust"
    assert robust.value_of_css_property("background-color") != fragile.value_of_css_property("background-color")
    failed = driver.find_element(By.CSS_SELECTOR, f'.failed-entries[data-zoo="{ZOO1}"] li[data-name="hangs"]')
    assert FAIL_REASON in failed.text  # listed apart from the ranking, with its reason
    assert driver.find_element(By.CSS_SELECTOR, row % "spectral_gap").text == "not audited"
    inconclusive = driver.find_element(By.CSS_SELECTOR, row % "norm.fro_prod")
    assert inconclusive.text == "inconclusive" and "badge-inconclusive" in inconclusive.get_attribute("class")
    colours = {b.value_of_css_property("background-color") for b in (robust, fragile, inconclusive)}
    assert len(colours) == 3  # a badge of its own, neither robust nor fragile
    assert "could not run: scaling: no learning curves" in inconclusive.get_attribute("title")


def test_entry_page_has_chart_provenance_and_command(driver: Any, site: Path, records: list[dict[str, Any]],
                                                    tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    load(driver, site.as_uri())
    driver.find_element(By.CSS_SELECTOR, f'table.leaderboard[data-zoo="{ZOO1}"] '
                                         'tr[data-name="margin.qrt_log"] a.entry').click()
    WebDriverWait(driver, 10).until(lambda d: d.current_url.endswith(f"entries/{ZOO1}/margin.qrt_log.html"))
    rec = next(r for r in records if r["name"] == "margin.qrt_log" and r["zoo"]["name"] == ZOO1)
    assert driver.find_element(By.ID, "entry-name").text == "margin.qrt_log"
    svg = driver.find_element(By.CSS_SELECTOR, "#chart svg")
    assert svg.size["width"] > 200 and svg.size["height"] > 200
    points = svg.find_elements(By.CSS_SELECTOR, "g#points use, g#points circle, g#points path")
    assert len(points) >= rec["scores"]["n"]
    assert svg.find_elements(By.CSS_SELECTOR, "g#identity path")  # the y = x line
    labels = svg.text
    assert "true generalization gap" in labels and "predicted gap" in labels
    assert driver.find_element(By.ID, "command").text == rec["provenance"]["command"]
    prov = driver.find_element(By.ID, "provenance").text
    for key, value in rec["provenance"].items():
        assert key in prov and str(value) in prov
    assert rec["zoo"]["table_sha256"] in prov
    assert "95% interval" in driver.find_element(By.ID, "scores").text
    assert "spurious-change rate" in driver.find_element(By.ID, "audit").text
    # the page opens with the verdict and the chart; the record's own fields come last
    order = [e.get_attribute("id") for e in driver.find_elements(By.CSS_SELECTOR, "main section, body > section")]
    assert order[:3] == ["verdict", "chart-section", "scores"] and order[-2:] == ["record", "provenance"], order
    verdict = driver.find_element(By.ID, "verdict").text.splitlines()
    kf, (lo, hi) = rec["scores"]["values"]["kfold_r2"], rec["scores"]["intervals"]["kfold_r2"]
    assert verdict[:2] == ["Verdict", f"rank 1 of 4 measures, group 1 (k-fold R\u00b2 {kf:.3f} [{lo:.3f}, {hi:.3f}])"]
    assert verdict[2].startswith("provisional: ")  # one training of an official grid: says how to complete it
    assert verdict[3].startswith("above the recipe: baseline.hparams ")
    shot = tmp_path / "entry.png"
    assert driver.save_screenshot(str(shot)) and shot.read_bytes()[:4] == b"\x89PNG"
    driver.find_element(By.LINK_TEXT, "\u2190 leaderboard").click()
    WebDriverWait(driver, 10).until(lambda d: "index.html" in d.current_url)


def test_failed_entry_says_why_and_has_no_chart(driver: Any, site: Path) -> None:
    from selenium.webdriver.common.by import By

    load(driver, (site.parent / "entries" / ZOO1 / "hangs.html").as_uri())
    assert FAIL_REASON in driver.find_element(By.ID, "failure").text
    assert not driver.find_elements(By.TAG_NAME, "svg")
    assert "genbench submit submissions/hangs" in driver.find_element(By.ID, "command").text


def test_record_text_is_escaped_and_never_runs(driver: Any, site: Path) -> None:
    from selenium.webdriver.common.by import By

    load(driver, site.as_uri())
    assert_not_pwned(driver)
    sub = driver.find_element(By.CSS_SELECTOR, f'table.leaderboard[data-zoo="{ZOO1}"] '
                                               'tr[data-name="spectral_gap"] .subtitle')
    assert sub.text == XSS_TITLE
    load(driver, (site.parent / "entries" / ZOO1 / "spectral_gap.html").as_uri())
    assert_not_pwned(driver)
    assert driver.find_element(By.CSS_SELECTOR, ".submission-title").text == XSS_TITLE
    assert "<b>B. Bold</b>" in driver.find_element(By.ID, "submission").text
    assert "a@example.org" not in driver.page_source  # a contact address is never published
    assert not driver.find_elements(By.CSS_SELECTOR, 'a[href^="javascript"]')


def test_index_marks_baselines_states_the_group_rule_hides_empty_columns_and_marks_refusals(driver: Any,
                                                                                           site: Path) -> None:
    from selenium.webdriver.common.by import By

    load(driver, site.as_uri())
    table = f'table.leaderboard[data-zoo="{ZOO1}"]'
    rows = {r.get_attribute("data-name"): r for r in driver.find_elements(By.CSS_SELECTOR, f"{table} tbody tr")}
    ranks = {name: r.find_elements(By.TAG_NAME, "td")[0].text for name, r in rows.items()}
    assert ranks.pop("baseline.hparams") == "\u2013"  # a baseline gets no rank number ...
    assert sorted(ranks.values()) == ["1", "2", "3", "4"]  # ... and the measures are numbered among themselves
    base = rows["baseline.hparams"]
    assert "baseline" in base.get_attribute("class").split()
    assert base.find_elements(By.TAG_NAME, "td")[1].text.isdigit()  # but it takes part in the groups
    mark = base.find_element(By.CSS_SELECTOR, ".badge-baseline")
    assert mark.text == "baseline" and "predicts the gap worse than the training recipe alone" in mark.get_attribute("title")
    note = driver.find_element(By.ID, "baseline-note").text
    assert "a measure below baseline.hparams predicts the gap worse than the training recipe alone" in note
    caption = driver.find_element(By.ID, f"table-{ZOO1}-note").text  # the table's note, below it
    assert ("group: entries whose paired 95% bootstrap interval of the k-fold R\u00b2 difference with the group's "
            "leader contains 0") in caption
    heads = [th.text for th in driver.find_elements(By.CSS_SELECTOR, f"{table} thead th")]
    assert not any(h.startswith("sign-error") for h in heads)  # never valued on this zoo: no column
    assert any(h.startswith("sign-error") for h in
               (th.text for th in driver.find_elements(By.CSS_SELECTOR, f'table.leaderboard[data-zoo="{ZOO2}"] th')))
    hidden = driver.find_element(By.CSS_SELECTOR, f"#zoo-{ZOO1} .hidden-columns").text
    assert "sign-error (worst)" in hidden and SIGN_ERROR_NOTE in hidden
    cells = rows["margin.qrt_log"].find_elements(By.TAG_NAME, "td")
    adj = cells[heads.index("adj. R\u00b2")]
    assert "refused" in adj.text and not any(ch.isdigit() for ch in adj.text)  # a mark, never a number
    assert ADJ_REFUSAL in adj.find_element(By.CSS_SELECTOR, ".refused").get_attribute("title")
    assert "also: norm.fro_sum" in rows["norm.fro_prod"].text and "norm.fro_sum" not in rows


def test_entry_page_shows_spread_transform_signed_cmi_aliases_refusals_and_missing_audit_parts(
        driver: Any, site: Path) -> None:
    from selenium.webdriver.common.by import By

    entries = site.parent / "entries" / ZOO1
    load(driver, (entries / "norm.fro_prod.html").as_uri())
    assert "also: norm.fro_sum" in driver.find_element(By.CSS_SELECTOR, "header.page").text
    scores = driver.find_element(By.ID, "scores").text
    assert "all models: log; training folds: log 97, linear 3" in scores
    assert "unconverged models scored\n2" in scores or "unconverged models scored 2" in " ".join(scores.split())
    assert "10-fold, 10 shuffles" in scores
    assert len(driver.find_elements(By.CSS_SELECTOR, "#spread-table tbody tr")) == 10
    assert "over 10 shuffles" in driver.find_element(By.ID, "spread").text
    assert "signed by the measure's declared direction" in driver.find_element(By.ID, "cmi-sign").text
    missing = driver.find_element(By.ID, "audit-missing").text
    assert "trend: no learning curves" in missing and "scaling: no learning curves" in missing
    badge = driver.find_element(By.CSS_SELECTOR, "#audit .badge")
    assert badge.text == "inconclusive" and "badge-inconclusive" in badge.get_attribute("class")
    assert_not_pwned(driver)

    load(driver, (entries / "margin.qrt_log.html").as_uri())
    assert ADJ_REFUSAL in driver.find_element(By.ID, "refused").text
    adj = driver.find_element(By.CSS_SELECTOR, '#scores-table tr[data-score="adj_r2"]')
    assert "refused" in adj.text and "0.5" not in adj.text

    load(driver, (entries / "baseline.hparams.html").as_uri())
    assert "predicts the gap worse than the training recipe alone" in driver.find_element(By.ID, "baseline").text
    assert "none (a baseline row)" in driver.find_element(By.ID, "record").text


# ---------------------------------------------------------------- layout at two screen sizes, chart, columns


def viewport(drv: Any, width: int, height: int) -> None:
    """Make the page's viewport exactly width x height CSS pixels."""
    for _ in range(3):
        outer, inner = drv.get_window_size(), drv.execute_script("return [window.innerWidth, window.innerHeight]")
        if inner == [width, height]:
            return
        drv.set_window_size(width + max(outer["width"] - inner[0], 0), height + max(outer["height"] - inner[1], 0))
    assert drv.execute_script("return [window.innerWidth, window.innerHeight]") == [width, height]


@pytest.fixture()
def screen(driver: Any) -> Iterator[Any]:
    """The driver, given back at 1400x1000 with no hidden columns, whatever a test did to it."""
    yield driver
    viewport(driver, 1400, 1000)
    driver.execute_script("window.localStorage.clear()")


def rows_in_first_screen(drv: Any) -> int:
    """How many rows of the leaderboard tables lie wholly within the viewport, the page scrolled to its top."""
    return drv.execute_script("""
        window.scrollTo(0, 0);
        return Array.prototype.filter.call(document.querySelectorAll('table.leaderboard tbody tr'), function (tr) {
          var b = tr.getBoundingClientRect();
          return b.height > 0 && b.top >= 0 && b.bottom <= window.innerHeight;
        }).length;""")


def chart_names(drv: Any, zoo_table: str) -> list[str]:
    """The entries of the shown marks of a table's overview chart, left to right as drawn."""
    return drv.execute_script("""
        var fig = document.querySelector('figure.overview[data-table="' + arguments[0] + '"]');
        var marks = Array.prototype.filter.call(fig.querySelectorAll('svg.mark'), function (m) {
          return getComputedStyle(m).display !== 'none'; });
        marks.sort(function (a, b) { return a.getBoundingClientRect().left - b.getBoundingClientRect().left; });
        return marks.map(function (m) { return m.getAttribute('data-name'); });""", zoo_table)


def names_cut(screen: Any) -> list[str]:
    """The entries whose name cell does not show the whole name (its content wider than the cell)."""
    return screen.execute_script("""
        return Array.prototype.filter.call(document.querySelectorAll('table.leaderboard td.entry-cell'),
          function (td) {
            return td.offsetParent !== null && [td, td.querySelector('a.entry')].some(function (e) {
              return e.scrollWidth > e.clientWidth + 1; });
          }).map(function (td) { return td.getAttribute('data-sort'); });""")


def test_at_1400x1000_a_screen_holds_at_least_15_entries_on_one_line_each(screen: Any, big_site: Path,
                                                                          tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    viewport(screen, 1400, 1000)
    load(screen, big_site.as_uri())
    rows = screen.find_elements(By.CSS_SELECTOR, "table.leaderboard tbody tr")
    assert len(rows) >= 20
    assert rows_in_first_screen(screen) >= 15  # the chart above the table included
    heights = sorted(r.rect["height"] for r in rows)
    assert heights[len(heights) // 2] <= 34  # one line for a typical row ...
    assert heights[-1] <= 64  # ... and never more than two (an entry with its aliases or badges beneath)
    cites = screen.find_elements(By.CSS_SELECTOR, 'table.leaderboard td[data-col="citation"] .clip')
    assert {c.get_attribute("title") for c in cites} >= set(CITATIONS)  # whole on hover ...
    assert all(c.rect["height"] <= 24 and 100 <= c.rect["width"] <= 200 for c in cites)  # ... one clipped line
    sub = screen.find_element(By.CSS_SELECTOR, 'tr[data-name="gradient_noise_scale"] td[data-col="submission"]')
    assert LONG_TITLE in sub.find_element(By.CSS_SELECTOR, ".clip").get_attribute("title")
    wrap = screen.execute_script("var w = document.querySelector('.table-wrap'); return [w.scrollWidth, w.clientWidth]")
    assert wrap[0] <= wrap[1]  # every column fits at this width: no sideways scrolling
    assert names_cut(screen) == []  # no entry name is cut
    shot = tmp_path / "index-1400x1000.png"
    assert screen.save_screenshot(str(shot)) and shot.read_bytes()[:4] == b"\x89PNG"


def test_at_400_px_rank_group_entry_and_kfold_show_and_the_rest_scrolls_in_its_frame(screen: Any, big_site: Path,
                                                                                        site: Path,
                                                                                        tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    viewport(screen, 400, 900)
    pages = [site, big_site, *(site.parent / "entries" / ZOO1).glob("*.html"),
             *list((big_site.parent / "entries" / BIG_ZOO).glob("*.html"))[:3]]
    for page in pages:
        load(screen, page.as_uri())
        outside = screen.execute_script("""
            var w = document.documentElement.clientWidth, bad = [];
            document.querySelectorAll('body *').forEach(function (e) {
              var b = e.getBoundingClientRect();
              if (b.width > 0 && b.right > w + 1 && !e.closest('.table-wrap, .overview-scroll, pre'))
                bad.push(e.tagName.toLowerCase() + '.' + e.getAttribute('class'));
            });
            return [document.documentElement.scrollWidth - w, bad];""")
        assert outside == [0, []], page  # no sideways overflow of the page: only inside a scroll frame
    load(screen, big_site.as_uri())
    table = "table.leaderboard"
    for col in ("rank", "group", "entry", "kfold_r2"):
        th = screen.find_element(By.CSS_SELECTOR, f'{table} th[data-col="{col}"]')
        assert th.rect["x"] >= 0 and th.rect["x"] + th.rect["width"] <= 400, col
    first = screen.find_element(By.CSS_SELECTOR, f"{table} tbody tr")
    kfold = first.find_element(By.CSS_SELECTOR, 'td[data-col="kfold_r2"]')
    assert kfold.rect["x"] + kfold.rect["width"] <= 400 and "[" in kfold.text  # the value with its interval
    wrap = screen.find_element(By.CSS_SELECTOR, ".table-wrap")
    assert screen.execute_script("return arguments[0].scrollWidth > arguments[0].clientWidth", wrap)
    cite = first.find_element(By.CSS_SELECTOR, 'td[data-col="citation"]')
    assert cite.rect["x"] > 400  # off screen ...
    screen.execute_script("arguments[0].scrollLeft = arguments[0].scrollWidth", wrap)
    assert 0 <= cite.rect["x"] and cite.rect["x"] + cite.rect["width"] <= 400  # ... and reachable by scrolling
    assert rows_in_first_screen(screen) >= 5
    assert names_cut(screen) == []  # no entry name is cut, at 400 px either
    planted = screen.execute_script("""var td = document.querySelector('table.leaderboard td.entry-cell');
        td.querySelector('a.entry').style.cssText = 'display: inline-block; width: 2rem; overflow: hidden; ' +
          'white-space: nowrap'; return td.getAttribute('data-sort');""")
    assert names_cut(screen) == [planted]  # the check sees a cut name
    shot = tmp_path / "index-400x900.png"
    assert screen.save_screenshot(str(shot)) and shot.read_bytes()[:4] == b"\x89PNG"


def test_the_overview_chart_has_one_mark_per_entry_ordered_like_the_table(screen: Any, big_site: Path,
                                                                          site: Path) -> None:
    from selenium.webdriver.common.by import By

    load(screen, big_site.as_uri())
    tid = f"table-{BIG_ZOO}"
    fig = screen.find_element(By.CSS_SELECTOR, f'figure.overview[data-table="{tid}"]')
    svg = fig.find_element(By.CSS_SELECTOR, "svg.overview-marks")
    assert svg.rect["width"] > 1000 and svg.rect["height"] >= 130  # the plot and a line of mark numbers
    names = visible_names(screen, BIG_ZOO)
    assert chart_names(screen, tid) == names  # one mark per row, in the ranking's order
    marks = {m.get_attribute("data-name"): m for m in svg.find_elements(By.CSS_SELECTOR, "svg.mark")}
    assert len(marks) == len(names) and len(svg.find_elements(By.CSS_SELECTOR, "svg.mark .pt")) == len(names)
    base = marks["baseline.hparams"]
    assert "baseline" in base.get_attribute("class").split() and base.find_element(By.CSS_SELECTOR, "path.pt")
    ranks = {n: screen.find_element(By.CSS_SELECTOR, f'tr[data-name="{n}"] td[data-col="rank"]').text.lstrip("=")
             for n in names}
    shown_as = {n: screen.find_element(By.CSS_SELECTOR, f'tr[data-name="{n}"] a.entry').text for n in names}
    assert {n: m.find_element(By.CSS_SELECTOR, "text.num").get_attribute("textContent")
            for n, m in marks.items()} == {n: "B" if n.startswith("baseline.") else ranks[n] for n in names}
    for n, m in marks.items():  # each mark numbered as the table ranks it, named in its title as the table names it
        assert f" \u00b7 {shown_as[n]}: " in m.find_element(By.TAG_NAME, "title").get_attribute("textContent")
        assert m.find_element(By.CSS_SELECTOR, "text.num").get_attribute("transform") is None  # horizontal
    boxes = [screen.execute_script("var b = arguments[0].getBoundingClientRect(); return [b.left, b.right, b.top, "
                                   "b.bottom];", m.find_element(By.CSS_SELECTOR, "text.num")) for m in marks.values()]
    outer = svg.rect
    assert all(outer["y"] <= top and bottom <= outer["y"] + outer["height"] + 0.5 for _, _, top, bottom in boxes)
    lefts = sorted(boxes)
    assert all(a[1] <= b[0] for a, b in zip(lefts, lefts[1:]))  # whole, inside the chart, none over another
    assert svg.find_elements(By.CSS_SELECTOR, "line.reference")  # the baseline's value across the chart

    def last_is_reference() -> bool:  # drawn after every mark: above the group bands
        return screen.execute_script("var c = arguments[0].children; return c[c.length - 1].matches('line.reference');",
                                     svg)
    assert last_is_reference()
    top = marks[names[0]]
    tip = top.find_element(By.TAG_NAME, "title").get_attribute("textContent")
    row = screen.find_element(By.CSS_SELECTOR, f'tr[data-name="{names[0]}"] td[data-col="kfold_r2"]').text
    assert tip.startswith(f"rank 1 \u00b7 {names[0]}: k-fold R\u00b2") and row.split()[0] in tip and \
        " ".join(row.split()[1:]) in tip  # the value and its interval, as the table shows them
    assert top.find_element(By.CSS_SELECTOR, "line.ci").get_attribute("y1") != \
        top.find_element(By.CSS_SELECTOR, "line.ci").get_attribute("y2")
    groups = [screen.find_element(By.CSS_SELECTOR, f'tr[data-name="{n}"] td[data-col="group"]').text for n in names]
    starts = [n for n in names if "run-start" in marks[n].get_attribute("class").split()]
    assert len(starts) == len(set(groups)) - 1  # a boundary where each rank group begins
    seps = screen.execute_script("""return Array.prototype.map.call(arguments[0].querySelectorAll('svg.mark'),
        function (m) { return getComputedStyle(m.querySelector('line.gsep')).display !== 'none'; });""", svg)
    assert sum(seps) == len(starts)  # drawn there only

    header(screen, BIG_ZOO, "Entry").click()  # sorted by another column: the chart follows
    assert chart_names(screen, tid) == visible_names(screen, BIG_ZOO) == sorted(names, key=lambda n: n.lower())
    assert last_is_reference()
    header(screen, BIG_ZOO, "Kendall").click()
    assert chart_names(screen, tid) == visible_names(screen, BIG_ZOO) != names
    box = screen.find_element(By.CSS_SELECTOR, f'input.row-filter[data-table="{tid}"]')
    box.send_keys("pacbayes")  # filtered: the chart narrows
    assert chart_names(screen, tid) == visible_names(screen, BIG_ZOO) and len(chart_names(screen, tid)) == 4

    load(screen, site.as_uri())  # one chart per zoo
    for zoo in (ZOO1, ZOO2):
        assert chart_names(screen, f"table-{zoo}") == visible_names(screen, zoo)


def test_a_reader_hides_columns_and_the_page_remembers(screen: Any, big_site: Path) -> None:
    from selenium.webdriver.common.by import By

    def shown(col: str) -> list[bool]:
        cells = screen.find_elements(By.CSS_SELECTOR, f'table.leaderboard [data-col="{col}"]')
        return [c.is_displayed() for c in cells]

    load(screen, big_site.as_uri())
    width = screen.find_element(By.CSS_SELECTOR, "table.leaderboard").rect["width"]
    assert all(shown("citation")) and all(shown("kind"))
    menu = screen.find_element(By.CSS_SELECTOR, "details.columns")
    menu.find_element(By.TAG_NAME, "summary").click()
    boxes = {b.get_attribute("data-col"): b for b in menu.find_elements(By.CSS_SELECTOR, "input[type=checkbox]")}
    assert {"kfold_r2", "kind", "fragility", "submission", "citation"} <= set(boxes)
    assert not {"rank", "group", "entry"} & set(boxes)  # those always show
    boxes["citation"].click()
    boxes["kind"].click()
    assert not any(shown("citation")) and not any(shown("kind")) and len(shown("citation")) == 26  # th + 25 rows
    assert all(shown("fragility"))
    assert screen.find_element(By.CSS_SELECTOR, "table.leaderboard").rect["width"] <= width
    load(screen, big_site.as_uri())  # remembered
    assert not any(shown("citation")) and not any(shown("kind")) and all(shown("submission"))
    menu = screen.find_element(By.CSS_SELECTOR, "details.columns")
    menu.find_element(By.TAG_NAME, "summary").click()
    box = menu.find_element(By.CSS_SELECTOR, 'input[data-col="citation"]')
    assert not box.is_selected()
    box.click()
    assert all(shown("citation")) and not any(shown("kind"))
    header(screen, BIG_ZOO, "k-fold").click()  # sorting with a hidden column still sorts by the right cells
    names = visible_names(screen, BIG_ZOO)
    kf = [float(screen.find_element(By.CSS_SELECTOR, f'tr[data-name="{n}"] td[data-col="kfold_r2"] .v').text)
          for n in names]
    assert kf == sorted(kf, reverse=True)


def _svg_series(svg: str) -> dict[str, list[tuple[float, float]]]:
    """The drawn points of each learning-curve series (path id 'curve-STAT-ARM-PANEL') of the page's SVG, mapped back
    to data values through the tick labels of its panel (two labelled ticks per axis, interpolated in log10 or
    linearly): what a reader would read off the plot."""
    import math
    import re
    import xml.etree.ElementTree as ET

    ns = "{http://www.w3.org/2000/svg}"
    root = ET.fromstring(svg)
    groups = {(g.get("data-stat"), g.get("data-panel")): g for g in root.iter(f"{ns}g") if g.get("class") == "panel"}

    def ticks(g: Any, cls: str, attr: str) -> list[tuple[float, float]]:
        return [(float(t.text.replace("\u2212", "-")), float(t.get(attr))) for t in g.iter(f"{ns}text")
                if t.get("class") == cls]

    def reader(marks: list[tuple[float, float]], log: bool) -> Any:
        (v0, p0), (v1, p1) = marks[0], marks[-1]
        f = math.log10 if log else float
        return lambda p: (10 ** (f(v0) + (p - p0) / (p1 - p0) * (f(v1) - f(v0))) if log else
                          v0 + (p - p0) / (p1 - p0) * (v1 - v0))

    out = {}
    for (stat, panel), g in groups.items():
        xr = reader(ticks(groups[("err", panel)], "xtick", "x"), True)
        yr = reader(ticks(g, "ytick", "y"), g.get("data-log") == "true")
        for path in g.iter(f"{ns}path"):
            pid = path.get("id", "")
            if re.fullmatch(r"curve-(mu|err)-.+-\d+", pid):
                nums = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", path.get("d"))]
                out[pid] = [(xr(x), yr(y)) for x, y in zip(nums[::2], nums[1::2])]
    return out


def test_entry_page_plots_the_audits_learning_curves_at_the_seed_means(tmp_path: Path) -> None:
    """An audit block with seed means gets an inline SVG of the learning curves: one series per arm and panel,
    whose drawn points are the seed means computed here from the per-model values; a record made before the
    means were recorded says why it has no plot."""
    import numpy as np
    import pandas as pd

    from genbench.leaderboard.curves import gid
    from genbench.scoring.audit import BASE, audit_table
    from genbench.scoring.audit_report import compact

    rng = np.random.default_rng(0)
    sizes, noise, arms = [100, 300, 1000], [0.0, 0.2], [BASE, "lr_x3", "batch_x2"]
    t = pd.DataFrame([{"arm": a, "train_size": n, "label_noise": r, "seed": s,
                       "err": 0.3 * (n / 100) ** -0.3 + 0.4 * r + rng.normal(0, 0.01),
                       "mu": (n / 100) ** (0.5 if a == "lr_x3" else -0.5) * rng.lognormal(0, 0.05)}
                      for a in arms for n in sizes for r in noise for s in range(3)])
    parts = audit_table(t, axes=["train_size", "label_noise", "seed"])
    recs = make_records()
    rec = next(r for r in recs if r["name"] == "norm.path" and r["zoo"]["name"] == ZOO1)
    rec["audit"] = {**rec["audit"], "measure": "norm.path", "form": parts["form"], "means": compact(parts["means"])}
    out = write_site(recs, tmp_path / "html", title="test leaderboard").parent
    pages = {p: p.read_text() for p in (out / "entries").rglob("*.html")}
    with_plot = [p for p, text in pages.items() if 'id="learning-curves"' in text]
    assert len(with_plot) == 1
    html = pages[with_plot[0]]
    svg = html[html.index("<svg", html.index('id="learning-curves"')):]
    svg = svg[:svg.index("</svg>") + len("</svg>")]
    series = _svg_series(svg)
    assert set(series) == {gid(s, a, i) for s in ("mu", "err") for a in arms for i in range(len(noise))}
    assert "one series per arm (base, batch_x2, lr_x3)" in html
    expect = t.groupby(["arm", "label_noise", "train_size"])[["mu", "err"]].mean()
    for i, r in enumerate(noise):
        for stat in ("mu", "err"):
            for a in arms:
                pts = np.array(series[gid(stat, a, i)])
                assert np.allclose(pts[:, 0], sizes, rtol=2e-3)
                assert np.allclose(pts[:, 1], [expect.loc[(a, r, n), stat] for n in sizes], rtol=2e-3)
    assert len(svg) < 60_000  # drawn by hand: a tenth of matplotlib's SVG
    # the records without means (made before they were recorded) say so instead of plotting
    audited = [text for p, text in pages.items() if p not in with_plot and 'id="audit"' in text
               and "Not audited." not in text]
    assert audited and all('id="learning-curves-none"' in text and "re-running the entry adds them" in text
                           for text in audited)


def test_a_score_column_shows_one_number_form(tmp_path: Path) -> None:
    """Every cell of a leaderboard score column has three fixed decimals, its interval too: a small value (planted:
    0.00345 [8.83e-05, 0.00683]) is not switched to significant digits beside 0.014 [0.008, 0.021]. Only an interval
    end that is not 0 but would print as 0.000 gets the decimals that show its sign: [0.0001, 0.007] lies above 0,
    [-0.0001, 0.007] (planted on another score) reaches below it."""
    import re

    recs = make_records()
    planted = next(r for r in recs if r["zoo"]["name"] == ZOO1 and r.get("scores"))
    planted["scores"]["values"]["adj_r2"] = 0.00345
    planted["scores"]["intervals"]["adj_r2"] = [8.83e-05, 0.00683]
    planted["scores"]["values"]["kfold_r2"] = 0.003
    planted["scores"]["intervals"]["kfold_r2"] = [-1.2e-04, 0.00683]
    index = write_site(recs, tmp_path / "html", title="t").read_text()
    cells = re.findall(r'<td class="num" data-col="(\w+)" data-sort="[^"]*"><span class="v">([^<]*)</span>'
                       r'(?: <span class="ci">([^<]*)</span>)?', index)
    assert any(col == "adj_r2" and v == "0.003" and ci == "[0.0001, 0.007]" for col, v, ci in cells)
    assert any(col == "kfold_r2" and v == "0.003" and ci == "[-0.0001, 0.007]" for col, v, ci in cells)
    fixed = re.compile(r"-?\d+\.\d{3}")
    end = re.compile(rf"{fixed.pattern}|-?0\.000\d*[1-9]")  # more decimals only for an end near 0
    for col, v, ci in cells:
        assert fixed.fullmatch(v) or v == "\u2013", (col, v)
        assert not ci or re.fullmatch(rf"\[(?:{end.pattern}), (?:{end.pattern})\]", ci), (col, ci)


def test_write_site_shows_progress_on_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """progress=True (the CLI's --html): a bar counting the entry pages on stderr; silent by default."""
    recs = make_records()
    write_site(recs, tmp_path / "quiet")
    assert "leaderboard page" not in capsys.readouterr().err
    write_site(recs, tmp_path / "loud", progress=True)
    err = capsys.readouterr().err
    pages = len(list((tmp_path / "loud" / "entries").rglob("*.html")))
    assert "leaderboard page" in err and f"{pages}/{pages}" in err


def test_the_page_explains_refusals_keeps_badges_and_zoo_names_whole_and_places_have_one_decimal(
        screen: Any, site: Path, records: list[dict[str, Any]], tmp_path: Path) -> None:
    """Issue 40, item 11: a refused cell's reason is said beneath the table, a fragility badge is never cut, a place
    across zoos reads 17.5 (not 17.500), the header counts local records plainly, and at 400 px no zoo link breaks
    inside its name."""
    import re

    from selenium.webdriver.common.by import By

    local = write_site([{**r, "local": True} if i == 0 else r for i, r in enumerate(records)],
                       tmp_path / "local" / "html", title="test leaderboard")
    for page, width in ((site, 1400), (local, 400)):
        viewport(screen, width, 900)
        load(screen, page.as_uri())
        notes = " ".join(e.text for e in screen.find_elements(By.CSS_SELECTOR, "ul.refusals li"))
        assert re.search(rf"refused \([^)]*: adj\. R\u00b2[^)]*\): {re.escape(ADJ_REFUSAL)}", notes), notes  # not only
        # in a title: the reason is on the page, with the cells it refuses
        cut = screen.execute_script("""return Array.prototype.filter.call(document.querySelectorAll(
            'table.leaderboard .badge'), function (b) { return b.offsetParent !== null &&
            b.scrollWidth > b.clientWidth + 1; }).map(function (b) { return b.textContent; });""")
        assert cut == []  # every badge whole (it was "fragile-value, dat...")
        places = [td.text for td in screen.find_elements(By.CSS_SELECTOR, "#aggregate-section td.num")]
        assert places and not any(re.fullmatch(r"\d+\.\d{2,}", t) for t in places)
        links = screen.find_elements(By.CSS_SELECTOR, "nav.zoos a")
        assert all(a.rect["height"] <= 1.6 * links[0].rect["height"] for a in links)  # one line each
        assert all(len(a.get_attribute("textContent").strip()) and "\n" not in a.text for a in links)
        shot = tmp_path / f"page-{width}.png"
        assert screen.save_screenshot(str(shot)) and shot.read_bytes()[:4] == b"\x89PNG"
    sub = screen.find_element(By.CSS_SELECTOR, "header.page p.sub").text
    assert "1 of these records is your own (local, not verified)" in sub and "of them local" not in sub
