//! `#[derive(Module)]` for kiln: generates `kiln::nn::Visit` (the walk over a struct's
//! parameters, buffers and child modules, in field order) and `Display` (PyTorch's
//! `print(net)` tree) for a struct of named fields.
//!
//! Field rules:
//! - `Tensor` fields are parameters; `#[module(buffer)]` makes one a buffer (BatchNorm's running
//!   statistics). `Option<_>` fields are visited when `Some`; `Vec<_>` fields are visited as
//!   `name.0`, `name.1`, … (the dotted names PyTorch gives a `ParameterList`/`ModuleList`).
//! - Any other field type must implement `kiln::nn::Module` and becomes a child module.
//! - Fields of plain data types (`bool`, integers, floats, `String`, and `Option`/`Vec`/arrays of
//!   them) are skipped, and so is any field marked `#[module(skip)]`.
//! - A `training: bool` field, if present, is the module's own train/eval flag.
//! - `#[module(extra_repr = "method")]` on the struct names a `fn(&self) -> String` whose text is
//!   printed inside the parentheses (`Linear(in_features=4, out_features=2, bias=True)`).

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::{parse_macro_input, Data, DeriveInput, Fields, GenericArgument, PathArguments, Type};

/// Derives `kiln::nn::Visit` and `Display` for a module struct (see the crate docs for the
/// field rules).
#[proc_macro_derive(Module, attributes(module))]
pub fn derive_module(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(tokens) => tokens.into(),
        Err(err) => err.to_compile_error().into(),
    }
}

/// How the derive treats one field.
enum Role {
    Visit { buffer: bool },
    Skip,
}

fn expand(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let name = &input.ident;
    let fields = match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(named) => named.named.iter().collect::<Vec<_>>(),
            Fields::Unit => Vec::new(),
            Fields::Unnamed(_) => {
                return Err(syn::Error::new_spanned(name, "#[derive(Module)] needs a struct with named fields"))
            }
        },
        _ => return Err(syn::Error::new_spanned(name, "#[derive(Module)] works on structs only")),
    };
    let mut visits = Vec::new();
    let mut visits_mut = Vec::new();
    let mut training_field = None;
    for field in fields {
        let ident = field.ident.as_ref().expect("named field");
        let label = ident.to_string();
        if label == "training" && is_bool(&field.ty) {
            training_field = Some(ident.clone());
            continue;
        }
        match role(field)? {
            Role::Skip => {}
            Role::Visit { buffer } => {
                visits.push(quote! {
                    ::kiln::nn::VisitField::visit_field(&self.#ident, #label, #buffer, visitor);
                });
                visits_mut.push(quote! {
                    ::kiln::nn::VisitField::visit_field_mut(&mut self.#ident, #label, #buffer, visitor);
                });
            }
        }
    }
    let training = match &training_field {
        Some(field) => quote! {
            fn own_training(&self) -> ::core::option::Option<bool> { ::core::option::Option::Some(self.#field) }
            fn set_own_training(&mut self, mode: bool) { self.#field = mode; }
        },
        None => quote! {},
    };
    let extra_repr = match container_extra_repr(input)? {
        Some(method) => quote! {
            fn extra_repr(&self) -> ::std::string::String { self.#method() }
        },
        None => quote! {},
    };
    let type_name = name.to_string();
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    Ok(quote! {
        impl #impl_generics ::kiln::nn::Visit for #name #ty_generics #where_clause {
            fn type_name(&self) -> ::std::string::String { ::std::string::String::from(#type_name) }
            #[allow(unused_variables)]
            fn visit_fields<'kiln_a>(&'kiln_a self, visitor: &mut dyn ::kiln::nn::FieldVisitor<'kiln_a>) {
                #(#visits)*
            }
            #[allow(unused_variables)]
            fn visit_fields_mut(&mut self, visitor: &mut dyn ::kiln::nn::FieldVisitorMut) {
                #(#visits_mut)*
            }
            #training
            #extra_repr
            fn as_dyn(&self) -> &dyn ::kiln::nn::Module { self }
            fn as_dyn_mut(&mut self) -> &mut dyn ::kiln::nn::Module { self }
        }

        impl #impl_generics ::core::fmt::Display for #name #ty_generics #where_clause {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                ::kiln::nn::fmt_module(self, f)
            }
        }
    })
}

/// Reads the struct's `#[module(extra_repr = "method")]`: the method that gives the text
/// printed inside the parentheses.
fn container_extra_repr(input: &DeriveInput) -> syn::Result<Option<syn::Ident>> {
    let mut method = None;
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("module")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("extra_repr") {
                let name: syn::LitStr = meta.value()?.parse()?;
                method = Some(syn::Ident::new(&name.value(), name.span()));
                Ok(())
            } else {
                Err(meta.error("expected `extra_repr = \"method\"`"))
            }
        })?;
    }
    Ok(method)
}

/// Reads `#[module(skip)]` / `#[module(buffer)]` and the field's type.
fn role(field: &syn::Field) -> syn::Result<Role> {
    let mut buffer = false;
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("module")) {
        let mut skip = false;
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("skip") {
                skip = true;
                Ok(())
            } else if meta.path.is_ident("buffer") {
                buffer = true;
                Ok(())
            } else {
                Err(meta.error("expected `skip` or `buffer`"))
            }
        })?;
        if skip {
            return Ok(Role::Skip);
        }
    }
    if !buffer && is_plain_data(&field.ty) {
        return Ok(Role::Skip);
    }
    Ok(Role::Visit { buffer })
}

fn is_bool(ty: &Type) -> bool {
    matches!(ty, Type::Path(p) if p.qself.is_none() && p.path.is_ident("bool"))
}

/// Plain data (numbers, flags, strings, and containers of them) is not part of a module tree.
fn is_plain_data(ty: &Type) -> bool {
    const PLAIN: &[&str] = &[
        "bool",
        "u8",
        "u16",
        "u32",
        "u64",
        "u128",
        "usize",
        "i8",
        "i16",
        "i32",
        "i64",
        "i128",
        "isize",
        "f32",
        "f64",
        "char",
        "String",
        "str",
        "DType",
        "Device",
        "PhantomData",
    ];
    match ty {
        Type::Reference(r) => is_plain_data(&r.elem),
        Type::Array(a) => is_plain_data(&a.elem),
        Type::Slice(s) => is_plain_data(&s.elem),
        Type::Tuple(t) => t.elems.iter().all(is_plain_data),
        Type::Path(p) if p.qself.is_none() => {
            let Some(last) = p.path.segments.last() else { return false };
            let ident = last.ident.to_string();
            if PLAIN.contains(&ident.as_str()) {
                return true;
            }
            if ident == "Option" || ident == "Vec" || ident == "Box" {
                if let PathArguments::AngleBracketed(args) = &last.arguments {
                    return args.args.iter().all(|a| match a {
                        GenericArgument::Type(t) => is_plain_data(t),
                        _ => true,
                    });
                }
            }
            false
        }
        _ => false,
    }
}
