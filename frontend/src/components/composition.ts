// Whether an Enter keydown belongs to an input method (IME) composition, on every engine. Chrome and
// Firefox flag it with `isComposing`; Safari fires `compositionend` before the keydown that confirms a
// candidate, with `isComposing` false and keyCode 229. So a keydown counts as composing when it says so,
// when its keyCode is 229 (the "IME is processing" code), or when it comes in the same tick as the end
// of a composition.

export interface Composition {
  start: () => void;
  end: () => void;
  composing: (e: KeyboardEvent) => boolean;
}

export function useComposition(): Composition {
  let active = false;
  let justEnded = false;
  return {
    start: () => {
      active = true;
    },
    end: () => {
      active = false;
      justEnded = true;
      setTimeout(() => (justEnded = false), 0);
    },
    // keyCode is deprecated but is the only signal Safari gives here
    composing: (e) => e.isComposing || active || justEnded || e.keyCode === 229,
  };
}
