//! Fixed-width text tables: columns of a width, aligned left or right, one space apart.

use std::fmt::Display;

/// A column: left- or right-aligned, at least this many characters wide.
#[derive(Clone, Copy)]
pub enum Col {
    /// Left-aligned.
    L(usize),
    /// Right-aligned.
    R(usize),
}

/// The columns of a table and the indent of its lines.
pub struct Table {
    indent: &'static str,
    cols: Vec<Col>,
}

impl Table {
    /// A table with these columns, its lines starting with `indent`.
    pub fn new(indent: &'static str, cols: &[Col]) -> Table {
        Table {
            indent,
            cols: cols.to_vec(),
        }
    }

    /// One line: each cell padded to its column (a longer cell is not cut).
    pub fn line(&self, cells: &[&dyn Display]) -> String {
        let mut out = self.indent.to_owned();
        for (i, (cell, col)) in cells.iter().zip(&self.cols).enumerate() {
            if i > 0 {
                out.push(' ');
            }
            out += &match *col {
                Col::L(w) => format!("{cell:<w$}"),
                Col::R(w) => format!("{cell:>w$}"),
            };
        }
        out
    }

    /// Prints [`Table::line`].
    pub fn print(&self, cells: &[&dyn Display]) {
        println!("{}", self.line(cells));
    }
}

/// `v` with `p` decimals, or `-` for `None`.
pub fn opt(v: Option<f64>, p: usize) -> String {
    v.map_or("-".to_owned(), |v| format!("{v:.p$}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_pad_like_format_widths() {
        let t = Table::new("  ", &[Col::L(6), Col::R(8), Col::R(3)]);
        let (x, e) = (3.14159, 2.5e-4);
        assert_eq!(
            t.line(&[&"ab", &format!("{x:.2}"), &format!("{e:.1e}")]),
            format!("  {:<6} {x:>8.2} {e:>3.1e}", "ab")
        );
        assert_eq!(opt(None, 2), "-");
        assert_eq!(opt(Some(1.0), 1), "1.0");
    }
}
