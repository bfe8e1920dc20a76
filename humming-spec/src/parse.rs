//! The `gemm!` surface syntax, parsed with syn into a span-carrying tree.
//!
//! ```text
//! gemm! {
//!     /// Doc comments and other attributes carry over to the generated type.
//!     pub kernel W4A16G128 {
//!         a: f16,                       // activation dtype (required)
//!         b: u4,                        // weight dtype (required)
//!         c: f16,                       // output dtype (defaults to `a` for 16-bit `a`)
//!         scale: group(128, f16),       // channel(f16) | group(G, f16) | block(N, K, f32) | tensor(f32)
//!         scale2: tensor(f32),          // optional secondary scale (channel, tensor or super-group)
//!         zero_point: int,              // none | int | float
//!         bias: true,
//!         layout: dense,                // dense | moe_indexed | moe_grouped_contiguous | moe_grouped_masked
//!         epilogue: silu,               // none | relu | silu | gelu | gelu_tanh
//!         arch: [sm_80, sm_90a],
//!         tiles: [tile(block = (16, 128, 64), warp = (16, 64, 64), stages = 4)],
//!     }
//! }
//! ```
//!
//! Parsing is purely syntactic and total: any token stream yields either a tree or a `syn::Error`,
//! never a panic. Meaning is checked by [`crate::validate`].

use proc_macro2::{Span, TokenStream};
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Attribute, Ident, LitBool, LitInt, Token, Visibility, braced, bracketed, parenthesized};

mod kw {
    syn::custom_keyword!(kernel);
}
use kw::kernel;

/// All kernels of one `gemm!` invocation.
#[derive(Clone)]
pub struct Declarations {
    /// The kernels, in source order.
    pub kernels: Vec<Declaration>,
}

/// One `[attrs] [vis] kernel Name { fields }` item.
#[derive(Clone)]
pub struct Declaration {
    /// Outer attributes (doc comments, `#[derive]` is not allowed: the macro derives what it needs).
    pub attrs: Vec<Attribute>,
    /// Visibility of the generated type.
    pub vis: Visibility,
    /// The kernel's type name.
    pub name: Ident,
    /// `key: value` fields, in source order.
    pub fields: Vec<Field>,
    /// Span of the closing brace, used for "missing field" errors.
    pub close_span: Span,
}

/// One `key: value` field.
#[derive(Clone)]
pub struct Field {
    /// The field name.
    pub key: Ident,
    /// The value.
    pub value: Value,
}

/// A value in the DSL: identifiers, integers, booleans, calls with (named) arguments, lists and tuples.
#[derive(Clone)]
pub enum Value {
    /// `f16`, `dense`, `sm_80`, `none`, ...
    Ident(Ident),
    /// `128`
    Int(LitInt),
    /// `true` / `false`
    Bool(LitBool),
    /// `group(128, f16)`, `tile(block = (..), ..)`
    Call(Ident, Vec<Arg>, Span),
    /// `[a, b]`
    List(Vec<Value>, Span),
    /// `(16, 128, 64)`
    Tuple(Vec<Value>, Span),
}

/// An argument of a call: positional or `name = value`.
#[derive(Clone)]
pub enum Arg {
    /// `128`
    Positional(Value),
    /// `stages = 4`
    Named(Ident, Value),
}

impl Value {
    /// The span to point at when this value is wrong.
    pub fn span(&self) -> Span {
        match self {
            Value::Ident(i) => i.span(),
            Value::Int(l) => l.span(),
            Value::Bool(b) => b.span,
            Value::Call(i, _, _) => i.span(),
            Value::List(_, s) | Value::Tuple(_, s) => *s,
        }
    }

    /// A short description for error messages.
    pub fn describe(&self) -> String {
        match self {
            Value::Ident(i) => format!("`{i}`"),
            Value::Int(l) => format!("`{}`", l.base10_digits()),
            Value::Bool(b) => format!("`{}`", b.value),
            Value::Call(i, _, _) => format!("`{i}(..)`"),
            Value::List(..) => "a list".into(),
            Value::Tuple(..) => "a tuple".into(),
        }
    }
}

impl Parse for Declarations {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut kernels = Vec::new();
        while !input.is_empty() {
            kernels.push(input.parse()?);
        }
        if kernels.is_empty() {
            return Err(syn::Error::new(
                Span::call_site(),
                "gemm! declares no kernel; write `pub kernel Name { a: f16, b: u4, ... }`",
            ));
        }
        Ok(Declarations { kernels })
    }
}

impl Parse for Declaration {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis: Visibility = input.parse()?;
        let lookahead = input.lookahead1();
        if !lookahead.peek(kernel) {
            return Err(syn::Error::new(
                input.span(),
                "expected `kernel Name { ... }` (e.g. `pub kernel W4A16 { a: f16, b: u4 }`)",
            ));
        }
        input.parse::<kernel>()?;
        let name: Ident = input.parse()?;
        let content;
        let brace = braced!(content in input);
        let fields: Punctuated<Field, Token![,]> =
            content.parse_terminated(Field::parse, Token![,])?;
        Ok(Declaration {
            attrs,
            vis,
            name,
            fields: fields.into_iter().collect(),
            close_span: brace.span.close(),
        })
    }
}

impl Parse for Field {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let key: Ident = input.call(Ident::parse_any)?;
        input.parse::<Token![:]>()?;
        let value = input.parse()?;
        Ok(Field { key, value })
    }
}

impl Parse for Value {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if input.peek(syn::token::Bracket) {
            let content;
            let b = bracketed!(content in input);
            let items: Punctuated<Value, Token![,]> =
                content.parse_terminated(Value::parse, Token![,])?;
            return Ok(Value::List(items.into_iter().collect(), b.span.join()));
        }
        if input.peek(syn::token::Paren) {
            let content;
            let p = parenthesized!(content in input);
            let items: Punctuated<Value, Token![,]> =
                content.parse_terminated(Value::parse, Token![,])?;
            return Ok(Value::Tuple(items.into_iter().collect(), p.span.join()));
        }
        if input.peek(LitInt) {
            return Ok(Value::Int(input.parse()?));
        }
        if input.peek(LitBool) {
            return Ok(Value::Bool(input.parse()?));
        }
        if input.peek(Ident::peek_any) {
            let ident: Ident = input.call(Ident::parse_any)?;
            if input.peek(syn::token::Paren) {
                let content;
                let p = parenthesized!(content in input);
                let args: Punctuated<Arg, Token![,]> =
                    content.parse_terminated(Arg::parse, Token![,])?;
                return Ok(Value::Call(
                    ident,
                    args.into_iter().collect(),
                    p.span.join(),
                ));
            }
            return Ok(Value::Ident(ident));
        }
        Err(input.error("expected a value: a name (`f16`), a number, `true`/`false`, a call (`group(128)`), a list `[..]` or a tuple `(..)`"))
    }
}

impl Parse for Arg {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if input.peek(Ident) && input.peek2(Token![=]) {
            let name: Ident = input.parse()?;
            input.parse::<Token![=]>()?;
            return Ok(Arg::Named(name, input.parse()?));
        }
        Ok(Arg::Positional(input.parse()?))
    }
}

/// Parses the body of one `gemm!` invocation.
pub fn parse_declarations(tokens: TokenStream) -> syn::Result<Declarations> {
    syn::parse2(tokens)
}
