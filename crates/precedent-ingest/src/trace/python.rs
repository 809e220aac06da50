//! Python error traces: tracebacks (plain, IPython, chained, doctest),
//! pytest failure sections and pytest's short-summary `FAILED` / `ERROR`
//! lines.

use std::sync::LazyLock;

use crate::Frame;
use crate::text::{Line, Pattern};

use super::{MAX_TRACE_LINES, ParsedError, cap_frames, frame, located_frame, make_error};

static PYTHON_FRAME: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r#"^\s*File "([^"]+)", line (\d+)(?:, in (.+))?\s*$"#));
static IPYTHON_FRAME: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^File (\S.*?):(\d+)(?:, in ([^\s(]+))?"));
static IPYTHON_OLD_FRAME: LazyLock<Pattern> = LazyLock::new(|| {
    Pattern::new(
        r"^\[?(<ipython-input-[^>\s]+>|[^\s\[\]()]+\.pyx?)\]?(?:\([^)\s]*\))? in ([\w<>.]+)",
    )
});
static PYTHON_EXCEPTION: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^([A-Za-z_][\w.]*)(?::\s?(.*))?$"));
static PYTEST_SECTION: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^_{3,} (.+?) _{3,}\s*$"));
static PYTEST_LOCATION: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^(\S+\.py):(\d+):(?: (\w+))?\s*$"));
static PYTEST_SHORT_FAILURE: LazyLock<Pattern> =
    LazyLock::new(|| Pattern::new(r"^(FAILED|ERROR) (\S+?\.py(?:::\S+?)?)(?: - (.*))?\s*$"));

/// This family's patterns, checked by [`super::warm_up`].
pub(super) fn patterns() -> [&'static Pattern; 7] {
    [
        &*PYTHON_FRAME,
        &*IPYTHON_FRAME,
        &*IPYTHON_OLD_FRAME,
        &*PYTHON_EXCEPTION,
        &*PYTEST_SECTION,
        &*PYTEST_LOCATION,
        &*PYTEST_SHORT_FAILURE,
    ]
}

/// A Python traceback from its `Traceback (most recent call last):` line.
pub(super) fn parse_python_traceback(
    lines: &[Line<'_>],
    start: usize,
) -> Option<(ParsedError, usize)> {
    let header = TracebackHeader::of(lines, start);
    let mut frames = Vec::new();
    let mut index = start + 1;
    let limit = lines.len().min(start + MAX_TRACE_LINES);
    while index < limit {
        let Some(line) = header.strip_prefix(lines[index].text) else {
            break;
        };
        match read_traceback_line(line, &mut frames) {
            TracebackLine::Read => index += 1,
            TracebackLine::Exception(error_type, message) => {
                cap_frames(&mut frames, true);
                return Some((
                    make_error(lines, start, index, error_type, message, frames),
                    index + 1,
                ));
            }
            TracebackLine::Beyond => break,
        }
    }
    let last = index.saturating_sub(1).max(start);
    cap_frames(&mut frames, true);
    let error_type = header
        .ipython_type
        .unwrap_or_else(|| "Traceback".to_string());
    Some((
        make_error(lines, start, last, &error_type, "", frames),
        last + 1,
    ))
}

/// What a traceback's first line says about the lines after it.
struct TracebackHeader<'a> {
    /// A log prefix repeated on every line ("(main_task pid=2794522) ",
    /// "INFO | "), or the indentation of a traceback quoted in a docstring.
    log_prefix: Option<&'a str>,
    /// The prefix is a log prefix, not indentation.
    has_log_prefix: bool,
    /// IPython's exception type, written before `Traceback`.
    ipython_type: Option<String>,
}

impl<'a> TracebackHeader<'a> {
    fn of(lines: &[Line<'a>], start: usize) -> TracebackHeader<'a> {
        let header = lines[start].text;
        // IPython: "LinAlgError        Traceback (most recent call last)".
        let header_prefix = header
            .split("Traceback (most recent call last)")
            .next()
            .map(str::trim)
            .unwrap_or("");
        let indentation = header
            .get(..header.len() - header.trim_start().len())
            .unwrap_or("");
        let log_prefix = if header_prefix.is_empty() {
            Some(indentation).filter(|indentation| !indentation.is_empty())
        } else {
            lines
                .get(start + 1)
                .filter(|next| next.text.starts_with(header_prefix))
                .map(|_| header_prefix)
        };
        let ipython_type = Some(header_prefix)
            .filter(|prefix| log_prefix.is_none() && !prefix.is_empty() && !prefix.contains(' '))
            .map(str::to_string);
        TracebackHeader {
            log_prefix,
            has_log_prefix: log_prefix.is_some_and(|prefix| !prefix.trim().is_empty()),
            ipython_type,
        }
    }

    /// The line without the prefix; `None` where a docstring traceback
    /// ends (its indentation does).
    fn strip_prefix<'l>(&self, raw_line: &'l str) -> Option<&'l str> {
        let Some(prefix) = self.log_prefix else {
            return Some(raw_line);
        };
        match raw_line.strip_prefix(prefix) {
            Some(rest) if self.has_log_prefix => Some(rest.strip_prefix(' ').unwrap_or(rest)),
            Some(rest) => Some(rest),
            None if !self.has_log_prefix && !raw_line.trim().is_empty() => None,
            None => Some(raw_line),
        }
    }
}

/// What one line of a traceback is.
enum TracebackLine<'l> {
    /// A frame, a frame's line or code, or noise: read on.
    Read,
    /// The exception line: its type and message.
    Exception(&'l str, &'l str),
    /// A line past the traceback (a new traceback, or some other
    /// unindented line: the exception line is missing).
    Beyond,
}

/// Reads one traceback line (its prefix stripped), adding frames it shows.
fn read_traceback_line<'l>(line: &'l str, frames: &mut Vec<Frame>) -> TracebackLine<'l> {
    let trimmed = line.trim_start();
    if trimmed.starts_with("File ") {
        let captures = PYTHON_FRAME
            .captures(line)
            .or_else(|| IPYTHON_FRAME.captures(trimmed));
        if let Some(captures) = captures {
            frames.push(located_frame(
                &captures,
                captures.get(3).map(|m| m.as_str()),
            ));
        }
        return TracebackLine::Read;
    }
    if line.contains("Traceback (most recent call last)") {
        // A new traceback began before this one named its exception.
        return TracebackLine::Beyond;
    }
    if let Some(captures) = IPYTHON_OLD_FRAME.captures(line) {
        // Older IPython: "<ipython-input-3-81609fd8d2ca> in <module>",
        // "~/venv/sklearn/linear_model/logistic.py in fit(self, X, y)".
        frames.push(frame(
            captures.get(1).map_or("", |m| m.as_str()),
            None,
            captures.get(2).map(|m| m.as_str()),
        ));
        return TracebackLine::Read;
    }
    if let Some(arrow) = trimmed.trim_start_matches('-').strip_prefix('>') {
        // "---> 52 test()": the line of the frame above.
        let number = arrow
            .trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|digits| digits.parse().ok());
        if let Some(last_frame) = frames.last_mut()
            && last_frame.line.is_none()
        {
            last_frame.line = number;
        }
        return TracebackLine::Read;
    }
    if is_traceback_body(line, trimmed) {
        if let Some(cell) = trimmed.strip_prefix("Cell In[") {
            let line_number = cell
                .split("line ")
                .nth(1)
                .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|digits| digits.parse().ok());
            frames.push(frame("<ipython cell>", line_number, None));
        }
        return TracebackLine::Read;
    }
    match PYTHON_EXCEPTION.captures(line) {
        Some(captures) => TracebackLine::Exception(
            captures.get(1).map_or("", |m| m.as_str()),
            captures.get(2).map_or("", |m| m.as_str()),
        ),
        None => TracebackLine::Beyond,
    }
}

/// A line inside a traceback that names no frame: blank, indented code,
/// an IPython cell, a caret line, an elision.
fn is_traceback_body(line: &str, trimmed: &str) -> bool {
    line.is_empty()
        || line.starts_with(char::is_whitespace)
        || trimmed.starts_with("Cell In[")
        || trimmed.chars().all(|c| c == '^' || c == '~')
        || trimmed.starts_with("...")
        || trimmed.starts_with("[Previous line repeated")
        || trimmed.starts_with("[... ")
}

/// A pytest failure section: `____ test_name ____` up to the next section or `====` line.
pub(super) fn parse_pytest_section(
    lines: &[Line<'_>],
    start: usize,
) -> Option<(ParsedError, usize)> {
    let captures = PYTEST_SECTION.captures(lines[start].text)?;
    let test_name = captures.get(1).map_or("", |m| m.as_str()).to_string();
    let mut frames = Vec::new();
    let mut first_e_line: Option<String> = None;
    let mut location_type: Option<String> = None;
    let mut index = start + 1;
    let limit = lines.len().min(start + MAX_TRACE_LINES);
    while index < limit {
        let text = lines[index].text;
        if text.starts_with("___") && PYTEST_SECTION.is_match(text) {
            break;
        }
        if text.starts_with("===") || text.starts_with("---") && text.contains(" Captured ") {
            break;
        }
        if let Some(content) = text.strip_prefix("E ") {
            if first_e_line.is_none() {
                first_e_line = Some(content.trim().to_string());
            }
        } else if let Some(location) = PYTEST_LOCATION.captures(text) {
            frames.push(located_frame(&location, None));
            if let Some(error_type) = location.get(3) {
                location_type = Some(error_type.as_str().to_string());
            }
        }
        index += 1;
    }
    if first_e_line.is_none() && frames.is_empty() {
        return None;
    }
    // pytest lists the test function's own location first.
    if let Some(first_frame) = frames.first_mut() {
        first_frame
            .function
            .get_or_insert(test_name.replace("::", "."));
    }
    let e_line = first_e_line.unwrap_or_default();
    let (mut error_type, message) = split_exception_text(&e_line);
    if let Some(location_type) = location_type {
        error_type = location_type;
    }
    cap_frames(&mut frames, true);
    let last = index.saturating_sub(1).max(start);
    Some((
        make_error(lines, start, last, &error_type, &message, frames),
        last + 1,
    ))
}

/// `ValueError: msg` → (ValueError, msg); `assert x == y` → (AssertionError, text).
fn split_exception_text(text: &str) -> (String, String) {
    let text = text.trim();
    if let Some((name, rest)) = text.split_once(':') {
        let name = name.trim();
        let looks_like_type = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
            && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
        if looks_like_type && name != "assert" {
            return (name.to_string(), rest.trim().to_string());
        }
    }
    ("AssertionError".to_string(), text.to_string())
}

/// `FAILED tests/x.py::test_y - ValueError: msg` (pytest -rA short summary).
pub(super) fn parse_pytest_short_failure(
    lines: &[Line<'_>],
    start: usize,
) -> Option<(ParsedError, usize)> {
    let captures = PYTEST_SHORT_FAILURE.captures(lines[start].text)?;
    let detail = captures.get(3)?.as_str();
    let node_id = captures.get(2).map_or("", |m| m.as_str());
    let (file, test) = match node_id.split_once("::") {
        Some((file, test)) => (file, Some(test)),
        None => (node_id, None),
    };
    let test = test.map(|name| {
        let without_params = name.split('[').next().unwrap_or(name);
        without_params.replace("::", ".")
    });
    let (error_type, message) = split_exception_text(detail);
    let frames = vec![frame(file, None, test.as_deref())];
    Some((
        make_error(lines, start, start, &error_type, &message, frames),
        start + 1,
    ))
}

#[cfg(test)]
mod tests {
    use crate::trace::tests::check;

    #[test]
    fn python_traceback() {
        check(
            "But raises\n```python\nTraceback (most recent call last):\n  File \"mre.py\", line 13, in <module>\n    my_flow.validate_parameters(flow_run_params)\n  File \"/usr/lib/python3.10/abc.py\", line 123, in __subclasscheck__\n    return _abc_subclasscheck(cls, subclass)\n           ^^^^^^^^^^^^^^^^\nTypeError: issubclass() arg 1 must be a class\n```\n",
            vec![(
                "TypeError",
                "issubclass() arg 1 must be a class",
                vec![
                    ("mre.py", Some(13), Some("<module>")),
                    (
                        "/usr/lib/python3.10/abc.py",
                        Some(123),
                        Some("__subclasscheck__"),
                    ),
                ],
            )],
        );
    }

    #[test]
    fn chained_python_tracebacks_are_separate_errors() {
        check(
            "Traceback (most recent call last):\n  File \"/u/decoder.py\", line 340, in decode\n    raise JSONDecodeError(\"Extra data\", s, end)\njson.decoder.JSONDecodeError: Extra data: line 1 column 9378\n\nDuring handling of the above exception, another exception occurred:\n\nTraceback (most recent call last):\n  File \"/u/common.py\", line 1091, in _parse_json\n    return json.loads(\nyt_dlp.utils.ExtractorError: Failed to parse JSON\n",
            vec![
                (
                    "json.decoder.JSONDecodeError",
                    "Extra data: line 1 column 9378",
                    vec![("/u/decoder.py", Some(340), Some("decode"))],
                ),
                (
                    "yt_dlp.utils.ExtractorError",
                    "Failed to parse JSON",
                    vec![("/u/common.py", Some(1091), Some("_parse_json"))],
                ),
            ],
        );
    }

    #[test]
    fn ipython_traceback_and_syntax_error_frame() {
        check(
            "LinAlgError                               Traceback (most recent call last)\nFile ~/code/seaborn/seaborn/_core/plot.py:265, in Plot._repr_png_(self)\n    263 def _repr_png_(self):\n--> 265     return self.plot()._repr_png_()\n\nLinAlgError: SVD did not converge in Linear Least Squares\n",
            vec![(
                "LinAlgError",
                "SVD did not converge in Linear Least Squares",
                vec![(
                    "~/code/seaborn/seaborn/_core/plot.py",
                    Some(265),
                    Some("Plot._repr_png_"),
                )],
            )],
        );
        check(
            "Traceback (most recent call last):\n  File \"x.py\", line 3\n    def f(\n         ^\nSyntaxError: invalid syntax\n",
            vec![(
                "SyntaxError",
                "invalid syntax",
                vec![("x.py", Some(3), None)],
            )],
        );
    }

    #[test]
    fn ipython_arrows_and_array_function_frames() {
        check(
            "LinAlgError                               Traceback (most recent call last)\nFile ~/code/seaborn/seaborn/_core/plot.py:1110, in Plotter._compute_stats(self, spec, layers)\n   1109 groupby = GroupBy(grouper)\n-> 1110 res = stat(df, groupby, orient, scales)\n\nFile ~/code/seaborn/seaborn/_stats/regression.py:41, in PolyFit.__call__(self, data)\n---> 41     return groupby.apply(data, self._fit_predict)\n\nFile <__array_function__ internals>:180, in polyfit(*args, **kwargs)\n\nLinAlgError: SVD did not converge in Linear Least Squares\n",
            vec![(
                "LinAlgError",
                "SVD did not converge in Linear Least Squares",
                vec![
                    (
                        "~/code/seaborn/seaborn/_core/plot.py",
                        Some(1110),
                        Some("Plotter._compute_stats"),
                    ),
                    (
                        "~/code/seaborn/seaborn/_stats/regression.py",
                        Some(41),
                        Some("PolyFit.__call__"),
                    ),
                    ("<__array_function__ internals>", Some(180), Some("polyfit")),
                ],
            )],
        );
    }

    #[test]
    fn pytest_section_names_the_test_on_its_first_frame() {
        check(
            "_______________ TestDataArray.test_from_series_multiindex _______________\n\n    def test_from_series_multiindex(self):\n>       actual = DataArray.from_series(series)\n\nxarray/tests/test_dataarray.py:3403: \n_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _\n\n>           raise ImportError(msg)\nE           ImportError: Pandas requires version '0.19.0' or newer of 'xarray'\n\n/opt/envs/testbed/lib/python3.10/site-packages/pandas/compat/_optional.py:171: ImportError\n",
            vec![(
                "ImportError",
                "Pandas requires version '0.19.0' or newer of 'xarray'",
                vec![
                    (
                        "xarray/tests/test_dataarray.py",
                        Some(3403),
                        Some("TestDataArray.test_from_series_multiindex"),
                    ),
                    (
                        "/opt/envs/testbed/lib/python3.10/site-packages/pandas/compat/_optional.py",
                        Some(171),
                        None,
                    ),
                ],
            )],
        );
    }

    #[test]
    fn old_ipython_frames_take_arrow_lines() {
        check(
            "IndexError                                Traceback (most recent call last)\n<ipython-input-3-81609fd8d2ca> in <module>\n----> 1 LogisticRegressionCV(refit=False).fit(X, y)\n\n~/.pyenv/versions/3.6.7/lib/python3.6/site-packages/sklearn/linear_model/logistic.py in fit(self, X, y, sample_weight)\n   2192                 else:\n-> 2193                 w = np.mean([coefs_paths[:, i, best_indices[i], :]\n\nIndexError: too many indices for array\n",
            vec![(
                "IndexError",
                "too many indices for array",
                vec![
                    ("<ipython-input-3-81609fd8d2ca>", Some(1), Some("<module>")),
                    (
                        "~/.pyenv/versions/3.6.7/lib/python3.6/site-packages/sklearn/linear_model/logistic.py",
                        Some(2193),
                        Some("fit"),
                    ),
                ],
            )],
        );
    }

    #[test]
    fn log_prefixed_traceback() {
        check(
            "(main_task pid=2794522) Traceback (most recent call last):\n(main_task pid=2794522)   File \"/ray/compiled_dag_ref.py\", line 93, in __del__\n(main_task pid=2794522)     self.get()\n(main_task pid=2794522) ValueError: boom\n",
            vec![(
                "ValueError",
                "boom",
                vec![("/ray/compiled_dag_ref.py", Some(93), Some("__del__"))],
            )],
        );
    }

    #[test]
    fn doctest_traceback_in_a_docstring() {
        check(
            "    >>> limit(1/x, x, 0, dir=\"+-\")\n    Traceback (most recent call last):\n        ...\n    ValueError: The limit does not exist\n\n    >>> limit(1/x, x, oo)\n",
            vec![("ValueError", "The limit does not exist", vec![])],
        );
    }

    #[test]
    fn truncated_traceback_keeps_frames() {
        check(
            "Traceback (most recent call last):\n  File \"a.py\", line 1, in f\n[... 500 characters omitted ...]\n",
            vec![("Traceback", "", vec![("a.py", Some(1), Some("f"))])],
        );
    }

    #[test]
    fn pytest_short_summary_and_section() {
        check(
            "FAILED testing/code/test_excinfo.py::test_excinfo_exconly - AttributeError: '...\nFAILED testing/code/test_excinfo.py::test_no_recursion_index_on_recursion_error\n",
            vec![(
                "AttributeError",
                "'...",
                vec![(
                    "testing/code/test_excinfo.py",
                    None,
                    Some("test_excinfo_exconly"),
                )],
            )],
        );
        check(
            "________________________________ test_all_even ________________________________\n\n    def test_all_even():\n>       assert all([is_even(n) for n in range(1, 100, 2)])\nE       assert False\n\ntest_all_any.py:7: AssertionError\n=========================== 1 failed in 0.02s ===========================\n",
            vec![(
                "AssertionError",
                "assert False",
                vec![("test_all_any.py", Some(7), Some("test_all_even"))],
            )],
        );
    }
}
