//! [`Shared`]: a part of the neutral request that copies share until one
//! of them changes it. A request is copied where a vendor model needs
//! different parameters (the request policy, `policy::apply`); its
//! messages, tools and echoed fields, which can be megabytes of text and
//! images, are not.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// Copy-on-write: cloning is a reference count; a mutable borrow of a
/// value another copy still holds copies it first.
#[derive(Debug, Default, PartialEq)]
pub struct Shared<T>(Arc<T>);

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<T> Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Clone> DerefMut for Shared<T> {
    fn deref_mut(&mut self) -> &mut T {
        Arc::make_mut(&mut self.0)
    }
}

impl<T> From<T> for Shared<T> {
    fn from(value: T) -> Self {
        Self(Arc::new(value))
    }
}

impl<'a, T> IntoIterator for &'a Shared<Vec<T>> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<T> FromIterator<T> for Shared<Vec<T>> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Self(Arc::new(iter.into_iter().collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_share_until_one_changes() {
        let mut a: Shared<Vec<u8>> = vec![1, 2].into();
        let b = a.clone();
        assert!(std::ptr::eq(a.as_ptr(), b.as_ptr()));
        a.push(3);
        assert_eq!((&a[..], &b[..]), (&[1, 2, 3][..], &[1, 2][..]));
        // Unshared: changed in place.
        let before = a.as_ptr();
        a[0] = 9;
        assert_eq!(a.as_ptr(), before);
    }
}
