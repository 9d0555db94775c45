^Found the token `const` but expected one of .*`event`.*
