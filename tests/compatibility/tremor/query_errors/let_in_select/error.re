^Found the token `let` but expected one of .*`event`.*
